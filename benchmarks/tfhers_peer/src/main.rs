//! Peer benchmark: TFHE-rs shortint programmable bootstrapping (KS-PBS atomic pattern).
//!
//! Usage: tfhers_peer --params 1_1,2_2,3_3 [--reps R] [--pfail 2m64|2m128] [--noise tuniform|gaussian]
//!
//! Per parameter set: client-key and server-key generation time, the server key's bincode size,
//! the latency of one `apply_lookup_table` (key switch + programmable bootstrap of one ciphertext)
//! after one warm-up, and a check that every output decrypts to f(m). Prints one JSON line on
//! stdout; progress goes to stderr. Key generation runs on rayon's pool (RAYON_NUM_THREADS);
//! a single lookup runs on the calling thread.

use std::time::Instant;

use tfhe::shortint::parameters::v1_6 as p64;
use tfhe::shortint::parameters::v1_8 as p128;
use tfhe::shortint::parameters::ClassicPBSParameters;
use tfhe::shortint::{ClientKey, ServerKey};

mod common;
use common::{
    csv, flag_pairs, json_f, json_obj, json_str, key_bytes_from_params, median, ms, param_fields,
    tfhe_version,
};

const USAGE: &str = "usage: tfhers_peer --params 1_1,2_2,3_3 [--reps R] [--pfail 2m64|2m128] \
[--noise tuniform|gaussian]";

/// One call slower than this ends the repetitions early (once MIN_REPS are done).
const SLOW_CALL_S: f64 = 1.0;
const MIN_REPS: usize = 3;

fn fail(msg: &str) -> ! {
    eprintln!("tfhers_peer: {msg}\n{USAGE}");
    std::process::exit(2);
}

struct Args {
    params: Vec<String>,
    reps: usize,
    pfail: String,
    noise: String,
}

fn parse_args() -> Args {
    let mut a = Args {
        params: vec!["1_1".into(), "2_2".into(), "3_3".into()],
        reps: 10,
        pfail: "2m64".into(),
        noise: "tuniform".into(),
    };
    for (key, val) in flag_pairs(USAGE, fail) {
        match key.as_str() {
            "--params" => a.params = csv(&val),
            "--reps" => {
                a.reps = val
                    .parse()
                    .unwrap_or_else(|_| fail(&format!("bad number {val:?} for --reps")))
            }
            "--pfail" => a.pfail = val.to_lowercase(),
            "--noise" => a.noise = val.to_lowercase(),
            _ => fail(&format!("unknown argument {key}")),
        }
    }
    if a.params.is_empty() {
        fail("--params is empty");
    }
    if a.reps < MIN_REPS {
        fail(&format!("--reps must be at least {MIN_REPS}"));
    }
    if a.pfail != "2m64" && a.pfail != "2m128" {
        fail("--pfail must be 2m64 or 2m128");
    }
    if a.noise != "tuniform" && a.noise != "gaussian" {
        fail("--noise must be tuniform or gaussian");
    }
    a
}

/// Picks a parameter set and its exact Rust path by (message_carry, p-fail family, noise kind).
/// 2^-64 sets: the newest ones this tfhe release ships (module v1_6; later modules have only 2^-128).
/// 2^-128 sets: the current ones (module v1_8, what the unversioned aliases point to).
fn lookup(mc: &str, pfail: &str, noise: &str) -> Option<(String, ClassicPBSParameters)> {
    macro_rules! pick {
        ($m:ident, $prefix:literal, $($key:literal => $name:ident),* $(,)?) => {
            match mc {
                $($key => Some((
                    format!("tfhe::shortint::parameters::{}::{}", $prefix, stringify!($name)),
                    $m::$name,
                )),)*
                _ => None,
            }
        };
    }
    match (pfail, noise) {
        ("2m64", "tuniform") => pick!(p64, "v1_6",
            "1_1" => V1_6_PARAM_MESSAGE_1_CARRY_1_KS_PBS_TUNIFORM_2M64,
            "2_2" => V1_6_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M64,
            "3_3" => V1_6_PARAM_MESSAGE_3_CARRY_3_KS_PBS_TUNIFORM_2M64,
            "4_4" => V1_6_PARAM_MESSAGE_4_CARRY_4_KS_PBS_TUNIFORM_2M64,
        ),
        ("2m64", "gaussian") => pick!(p64, "v1_6",
            "1_1" => V1_6_PARAM_MESSAGE_1_CARRY_1_KS_PBS_GAUSSIAN_2M64,
            "2_2" => V1_6_PARAM_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M64,
            "3_3" => V1_6_PARAM_MESSAGE_3_CARRY_3_KS_PBS_GAUSSIAN_2M64,
            "4_4" => V1_6_PARAM_MESSAGE_4_CARRY_4_KS_PBS_GAUSSIAN_2M64,
        ),
        ("2m128", "tuniform") => pick!(p128, "v1_8",
            "1_1" => V1_8_PARAM_MESSAGE_1_CARRY_1_KS_PBS_TUNIFORM_2M128,
            "2_2" => V1_8_PARAM_MESSAGE_2_CARRY_2_KS_PBS_TUNIFORM_2M128,
            "3_3" => V1_8_PARAM_MESSAGE_3_CARRY_3_KS_PBS_TUNIFORM_2M128,
            "4_4" => V1_8_PARAM_MESSAGE_4_CARRY_4_KS_PBS_TUNIFORM_2M128,
        ),
        ("2m128", "gaussian") => pick!(p128, "v1_8",
            "1_1" => V1_8_PARAM_MESSAGE_1_CARRY_1_KS_PBS_GAUSSIAN_2M128,
            "2_2" => V1_8_PARAM_MESSAGE_2_CARRY_2_KS_PBS_GAUSSIAN_2M128,
            "3_3" => V1_8_PARAM_MESSAGE_3_CARRY_3_KS_PBS_GAUSSIAN_2M128,
            "4_4" => V1_8_PARAM_MESSAGE_4_CARRY_4_KS_PBS_GAUSSIAN_2M128,
        ),
        _ => None,
    }
}

fn bench_one(mc: &str, name: &str, p: ClassicPBSParameters, reps: usize) -> String {
    let space = p.message_modulus.0 * p.carry_modulus.0; // full plaintext space, message + carry
    let bits = space.trailing_zeros();
    eprintln!("tfhers_peer: {name} ({bits} bits)");

    let t = Instant::now();
    let cks = ClientKey::new(p);
    let cks_ms = ms(t);
    let t = Instant::now();
    let sks = ServerKey::new(&cks);
    let sks_ms = ms(t);
    eprintln!("  keygen: client {cks_ms:.1} ms, server {sks_ms:.1} ms");

    let sks_bytes = bincode::serialized_size(&sks).unwrap_or(0);
    let (bsk_bytes, ksk_bytes) = key_bytes_from_params(&p);

    // A nonlinear function over the whole message+carry space.
    let f = move |x: u64| (x * x + 3 * x + 1) % space;
    let t = Instant::now();
    let lut = sks.generate_lookup_table(f);
    let lut_ms = ms(t);

    // Inputs: a different message per call, encrypted before timing; outputs checked after.
    let msgs: Vec<u64> = (0..=reps as u64).map(|i| (5 * i + 2) % space).collect();
    let cts: Vec<_> = msgs.iter().map(|&m| cks.unchecked_encrypt(m)).collect();

    let mut checked = 0usize;
    let mut wrong = 0usize;
    let mut check = |m: u64, ct: &tfhe::shortint::Ciphertext| {
        checked += 1;
        let got = cks.decrypt_message_and_carry(ct);
        if got != f(m) {
            wrong += 1;
            eprintln!("  WRONG: f({m}) = {} but decrypted {got}", f(m));
        }
    };

    let t = Instant::now();
    let warm = sks.apply_lookup_table(&cts[0], &lut);
    let warm_ms = ms(t);
    check(msgs[0], &warm);

    let mut times = Vec::with_capacity(reps);
    for i in 1..=reps {
        let t = Instant::now();
        let out = sks.apply_lookup_table(&cts[i], &lut);
        let dt = ms(t);
        times.push(dt);
        check(msgs[i], &out);
        if times.len() >= MIN_REPS && dt > SLOW_CALL_S * 1e3 {
            break;
        }
    }
    let med = median(&times);
    let min = times.iter().cloned().fold(f64::INFINITY, f64::min);
    let max = times.iter().cloned().fold(0.0, f64::max);
    eprintln!(
        "  apply_lookup_table: median {med:.2} ms (min {min:.2}, max {max:.2}, {} reps), {} of {checked} correct",
        times.len(),
        checked - wrong
    );

    let mut fields: Vec<(&str, String)> = vec![
        ("params", json_str(mc)),
        ("param_name", json_str(name)),
        ("bits", bits.to_string()),
    ];
    fields.extend(param_fields(&p));
    fields.extend([
        ("client_keygen_ms", json_f(cks_ms)),
        ("server_keygen_ms", json_f(sks_ms)),
        ("server_key_bytes", sks_bytes.to_string()),
        (
            "server_key_bytes_method",
            json_str("bincode::serialized_size(ServerKey)"),
        ),
        ("bsk_bytes_from_params", bsk_bytes.to_string()),
        ("ksk_bytes_from_params", ksk_bytes.to_string()),
        ("lut_gen_ms", json_f(lut_ms)),
        (
            "op",
            json_str("apply_lookup_table (keyswitch + PBS, one ciphertext)"),
        ),
        ("function", json_str("f(x) = (x^2 + 3x + 1) mod 2^bits")),
        ("warmup_ms", json_f(warm_ms)),
        ("reps", times.len().to_string()),
        ("pbs_median_ms", json_f(med)),
        ("pbs_min_ms", json_f(min)),
        ("pbs_max_ms", json_f(max)),
        ("checked", checked.to_string()),
        ("correct", (wrong == 0).to_string()),
    ]);
    json_obj(&fields)
}

fn main() {
    let args = parse_args();
    let mut chosen = Vec::new();
    for mc in &args.params {
        match lookup(mc, &args.pfail, &args.noise) {
            Some((name, p)) => chosen.push((mc.clone(), name, p)),
            None => fail(&format!(
                "unknown parameter set {mc:?} (have 1_1, 2_2, 3_3, 4_4)"
            )),
        }
    }
    let threads = rayon::current_num_threads();
    eprintln!(
        "tfhers_peer: tfhe {} pfail {} noise {} rayon threads {threads}",
        tfhe_version(),
        args.pfail,
        args.noise
    );
    let records: Vec<String> = chosen
        .into_iter()
        .map(|(mc, name, p)| bench_one(&mc, &name, p, args.reps))
        .collect();
    println!(
        "{{\"peer\": {}, \"pfail\": {}, \"noise\": {}, \"rayon_threads\": {threads}, \"records\": [{}]}}",
        json_str(&format!("tfhe-rs {}", tfhe_version())),
        json_str(&args.pfail),
        json_str(&args.noise),
        records.join(", ")
    );
}
