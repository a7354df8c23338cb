//! Peer benchmark: TFHE-rs high-level encrypted integers (`FheUint8/16/32/64`) under its default config.
//!
//! Usage: integers [--widths 8,16,32,64] [--ops add,mul,lt,eq,min,and,shl3,select] [--reps R]
//!                 [--threads T] [--seed S]
//!
//! Keys: `ConfigBuilder::default()` (the parameters TFHE-rs picks for `FheUint` on a CPU; the record names the
//! constant they equal), then `ClientKey::generate` and `generate_server_key` timed apart (the two steps of
//! `generate_keys`); the server key's bincode size (the default config also makes a dedicated OPRF
//! bootstrapping key, which is in it) and the compute keys' sizes from the parameters; `set_server_key`.
//! Per width: two clear operands from a fixed-seed generator (splitmix64), `a` with its top bit set (every
//! carry runs through), encrypted; the select's condition is the encrypted comparison `b < a`.
//! Per operator and width: one untimed warm-up call, then `--reps` timed calls (each builds the output
//! ciphertext; the operands are never modified), their median and all samples in ms, the PBS count of each
//! call (tfhe's `pbs-stats` counter, reset before each call), and whether every output decrypted to the
//! clear result. Operators: add `a + b`, mul `a * b` (both wrapping), lt `a.lt(&b)`, eq `a.eq(&b)`,
//! min `a.min(&b)`, and `a & b`, shl3 `a << 3u32` (clear shift amount), select `cond.if_then_else(&a, &b)`.
//! The server key's operators run on rayon's global pool, built with `--threads` threads.
//! One JSON line on stdout; progress on stderr.

use std::time::Instant;

use tfhe::prelude::*;
use tfhe::shortint::parameters::v1_8;
use tfhe::shortint::parameters::PBSParameters;
use tfhe::shortint::AtomicPatternParameters;
use tfhe::{
    set_server_key, ClientKey, ConfigBuilder, FheBool, FheUint16, FheUint32, FheUint64, FheUint8,
};

#[path = "../common.rs"]
mod common;
use common::{
    csv, flag_pairs, json_f, json_obj, json_str, key_bytes_from_params, median, ms, param_fields,
    tfhe_version,
};

const USAGE: &str = "usage: integers [--widths 8,16,32,64] \
[--ops add,mul,lt,eq,min,and,shl3,select] [--reps R] [--threads T] [--seed S]";
const OPS: [&str; 8] = ["add", "mul", "lt", "eq", "min", "and", "shl3", "select"];
const WIDTHS: [u32; 4] = [8, 16, 32, 64];

fn fail(msg: &str) -> ! {
    eprintln!("integers: {msg}\n{USAGE}");
    std::process::exit(2);
}

struct Args {
    widths: Vec<u32>,
    ops: Vec<String>,
    reps: usize,
    threads: usize,
    seed: u64,
}

fn number<T: std::str::FromStr>(key: &str, val: &str) -> T {
    val.parse()
        .unwrap_or_else(|_| fail(&format!("bad number {val:?} for {key}")))
}

fn parse_args() -> Args {
    let mut a = Args {
        widths: WIDTHS.to_vec(),
        ops: OPS.iter().map(|s| s.to_string()).collect(),
        reps: 5,
        threads: 1,
        seed: 48,
    };
    for (key, val) in flag_pairs(USAGE, fail) {
        let key = key.as_str();
        match key {
            "--widths" => a.widths = csv(&val).iter().map(|w| number(key, w)).collect(),
            "--ops" => a.ops = csv(&val),
            "--reps" => a.reps = number(key, &val),
            "--threads" => a.threads = number(key, &val),
            "--seed" => a.seed = number(key, &val),
            _ => fail(&format!("unknown argument {key}")),
        }
    }
    if let Some(w) = a.widths.iter().find(|w| !WIDTHS.contains(w)) {
        fail(&format!("unknown width {w} (have 8, 16, 32, 64)"));
    }
    if let Some(op) = a.ops.iter().find(|op| !OPS.contains(&op.as_str())) {
        fail(&format!("unknown operator {op:?} (have {})", OPS.join(",")));
    }
    if a.widths.is_empty() || a.ops.is_empty() {
        fail("--widths and --ops must name at least one");
    }
    if a.reps < 1 || a.threads < 1 {
        fail("--reps and --threads must be at least 1");
    }
    a
}

/// splitmix64: the clear operands, reproducible from --seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The parameter set the config resolved to: the Rust path of the constant it equals, and its kind.
fn param_name(p: &AtomicPatternParameters) -> (String, &'static str) {
    let known: [(&str, AtomicPatternParameters); 4] = [
        (
            "tfhe::shortint::parameters::PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128 \
             (= v1_8::V1_8_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128)",
            v1_8::V1_8_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128.into(),
        ),
        (
            "tfhe::shortint::parameters::v1_8::V1_8_PARAM_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M128",
            v1_8::V1_8_PARAM_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M128.into(),
        ),
        (
            "tfhe::shortint::parameters::v1_8::V1_8_PARAM_MESSAGE_2_CARRY_2_KS32_PBS_TUNIFORM_2M128",
            v1_8::V1_8_PARAM_MESSAGE_2_CARRY_2_KS32_PBS_TUNIFORM_2M128.into(),
        ),
        (
            "tfhe::shortint::parameters::v1_8::V1_8_PARAM_MULTI_BIT_GROUP_4_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128",
            v1_8::V1_8_PARAM_MULTI_BIT_GROUP_4_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128.into(),
        ),
    ];
    let kind = match p {
        AtomicPatternParameters::Standard(PBSParameters::PBS(_)) => "KS-PBS (classic)",
        AtomicPatternParameters::Standard(PBSParameters::MultiBitPBS(_)) => "KS-PBS (multi-bit)",
        AtomicPatternParameters::KeySwitch32(_) => "KS32-PBS",
    };
    let name = known
        .iter()
        .find(|(_, q)| q == p)
        .map(|(n, _)| n.to_string())
        .unwrap_or_else(|| "unknown (not one of the 2_2 2^-128 sets this harness names)".into());
    (name, kind)
}

/// One operator at one width: warm-up, `reps` timed calls, PBS per call, outputs checked.
#[allow(clippy::too_many_arguments)]
fn time_op<O>(
    op: &str,
    bits: u32,
    a: u64,
    b: u64,
    want: u64,
    reps: usize,
    call: impl Fn() -> O,
    decrypt: impl Fn(&O) -> u64,
) -> String {
    let mut wrong = 0usize;
    let mut check = |out: &O| {
        let got = decrypt(out);
        if got != want {
            wrong += 1;
            eprintln!("  WRONG: {op} {bits} bits: want {want}, decrypted {got}");
        }
    };
    tfhe::reset_pbs_count();
    let t = Instant::now();
    let out = call();
    let warm_ms = ms(t);
    let pbs = tfhe::get_pbs_count();
    check(&out);
    drop(out);
    let mut times = Vec::with_capacity(reps);
    let mut pbs_all = Vec::with_capacity(reps);
    for _ in 0..reps {
        tfhe::reset_pbs_count();
        let t = Instant::now();
        let out = call();
        times.push(ms(t));
        pbs_all.push(tfhe::get_pbs_count());
        check(&out);
    }
    let med = median(&times);
    eprintln!(
        "  {bits:>2} bits {op:<7} {med:9.1} ms  {pbs:>5} PBS{}",
        if wrong == 0 { "" } else { "  WRONG" }
    );
    let list = |v: Vec<String>| format!("[{}]", v.join(", "));
    json_obj(&[
        ("op", json_str(op)),
        ("bits", bits.to_string()),
        ("a", a.to_string()),
        ("b", b.to_string()),
        ("want", want.to_string()),
        ("warmup_ms", json_f(warm_ms)),
        ("reps", times.len().to_string()),
        ("ms", json_f(med)),
        ("ms_all", list(times.iter().map(|&x| json_f(x)).collect())),
        ("pbs", pbs.to_string()),
        (
            "pbs_all",
            list(pbs_all.iter().map(u64::to_string).collect()),
        ),
        ("checked", (reps + 1).to_string()),
        ("correct", (wrong == 0).to_string()),
    ])
}

/// An operator's output: an integer of the operands' type, or a boolean.
enum Out<T> {
    Int(T),
    Bool(FheBool),
}

/// Every requested operator at one width (`$fhe` the encrypted type, `$clear` its clear type).
macro_rules! bench_width {
    ($fhe:ty, $clear:ty, $bits:expr, $args:expr, $ck:expr, $rng:expr, $rows:expr) => {{
        let bits: u32 = $bits;
        let a: $clear = ($rng.next() as $clear) | ((1 as $clear) << (bits - 1));
        let b: $clear = $rng.next() as $clear;
        let x = <$fhe>::encrypt(a, $ck);
        let y = <$fhe>::encrypt(b, $ck);
        let cond: FheBool = FheOrd::lt(&y, &x);
        let c = b < a;
        for op in &$args.ops {
            let want: u64 = match op.as_str() {
                "add" => a.wrapping_add(b) as u64,
                "mul" => a.wrapping_mul(b) as u64,
                "lt" => (a < b) as u64,
                "eq" => (a == b) as u64,
                "min" => a.min(b) as u64,
                "and" => (a & b) as u64,
                "shl3" => (a << 3) as u64,
                "select" => (if c { a } else { b }) as u64,
                _ => unreachable!(),
            };
            let call = || -> Out<$fhe> {
                match op.as_str() {
                    "add" => Out::Int(&x + &y),
                    "mul" => Out::Int(&x * &y),
                    "lt" => Out::Bool(FheOrd::lt(&x, &y)),
                    "eq" => Out::Bool(FheEq::eq(&x, &y)),
                    "min" => Out::Int(FheMin::min(&x, &y)),
                    "and" => Out::Int(&x & &y),
                    "shl3" => Out::Int(&x << 3u32),
                    "select" => Out::Int(IfThenElse::if_then_else(&cond, &x, &y)),
                    _ => unreachable!(),
                }
            };
            let decrypt = |o: &Out<$fhe>| -> u64 {
                match o {
                    Out::Int(v) => {
                        let clear: $clear = v.decrypt($ck);
                        clear as u64
                    }
                    Out::Bool(v) => {
                        let clear: bool = v.decrypt($ck);
                        clear as u64
                    }
                }
            };
            $rows.push(time_op(
                op, bits, a as u64, b as u64, want, $args.reps, call, decrypt,
            ));
        }
    }};
}

fn main() {
    let args = parse_args();
    rayon::ThreadPoolBuilder::new()
        .num_threads(args.threads)
        .build_global()
        .unwrap_or_else(|e| fail(&format!("rayon pool: {e}")));
    let threads = rayon::current_num_threads();
    eprintln!("integers: tfhe {} rayon threads {threads}", tfhe_version());

    let config = ConfigBuilder::default().build();
    let t = Instant::now();
    let ck = ClientKey::generate(config);
    let cks_ms = ms(t);
    let t = Instant::now();
    let sk = ck.generate_server_key();
    let sks_ms = ms(t);
    let sks_bytes = bincode::serialized_size(&sk).unwrap_or(0);
    set_server_key(sk);
    let params = ck.computation_parameters();
    let (name, kind) = param_name(&params);
    eprintln!(
        "  keygen: client {cks_ms:.1} ms, server {sks_ms:.1} ms, server key {sks_bytes} bytes; {name}"
    );

    let mut rng = Rng(args.seed);
    let mut rows: Vec<String> = Vec::new();
    for &bits in &args.widths {
        match bits {
            8 => bench_width!(FheUint8, u8, 8, args, &ck, rng, rows),
            16 => bench_width!(FheUint16, u16, 16, args, &ck, rng, rows),
            32 => bench_width!(FheUint32, u32, 32, args, &ck, rng, rows),
            64 => bench_width!(FheUint64, u64, 64, args, &ck, rng, rows),
            _ => unreachable!(),
        }
    }

    let mut fields: Vec<(&str, String)> = vec![
        ("peer", json_str(&format!("tfhe-rs {}", tfhe_version()))),
        (
            "api",
            json_str("high-level FheUint, ConfigBuilder::default()"),
        ),
        ("param_name", json_str(&name)),
        ("atomic_pattern", json_str(kind)),
    ];
    match params {
        AtomicPatternParameters::Standard(PBSParameters::PBS(p)) => {
            fields.extend(param_fields(&p));
            let (bsk, ksk) = key_bytes_from_params(&p);
            fields.extend([
                ("bsk_bytes_from_params", bsk.to_string()),
                ("ksk_bytes_from_params", ksk.to_string()),
            ]);
        }
        _ => fields.extend([
            ("message_modulus", params.message_modulus().0.to_string()),
            ("carry_modulus", params.carry_modulus().0.to_string()),
            ("lwe_dimension", params.lwe_dimension().0.to_string()),
            ("glwe_dimension", params.glwe_dimension().0.to_string()),
            ("polynomial_size", params.polynomial_size().0.to_string()),
        ]),
    }
    fields.extend([
        ("rayon_threads", threads.to_string()),
        ("seed", args.seed.to_string()),
        ("pbs_stats", "true".into()),
        ("client_keygen_ms", json_f(cks_ms)),
        ("server_keygen_ms", json_f(sks_ms)),
        ("server_key_bytes", sks_bytes.to_string()),
        (
            "server_key_bytes_method",
            json_str("bincode::serialized_size(tfhe::ServerKey)"),
        ),
        ("records", format!("[{}]", rows.join(", "))),
    ]);
    println!("{}", json_obj(&fields));
}
