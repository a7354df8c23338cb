//! Peer benchmark: tfhe-ntt negacyclic NTT, forward and inverse, over K limbs (one prime each).
//!
//! Usage: ntt_peer --log-n L --limbs K [--reps R] [--warmup W] [--plan prime32|prime64]
//!                 [--primes p1,p2,...] [--prime-bits B]
//! Primes are normally passed by the caller (`--primes`); without them the K largest primes
//! p < 2^B with p = 1 mod 2N are found here (deterministic Miller-Rabin). Prints one JSON line.
//! Single-threaded: tfhe-ntt runs on the calling thread only.

use std::time::Instant;

const USAGE: &str = "usage: ntt_peer --log-n L --limbs K [--reps R] [--warmup W] \
[--plan prime32|prime64] [--primes p1,p2,...] [--prime-bits B]";

struct Args {
    log_n: u32,
    limbs: usize,
    reps: usize,
    warmup: usize,
    plan: String,
    primes: Option<Vec<u64>>,
    prime_bits: u32,
}

fn fail(msg: &str) -> ! {
    eprintln!("ntt_peer: {msg}\n{USAGE}");
    std::process::exit(2);
}

fn parse_args() -> Args {
    let mut a = Args {
        log_n: 14,
        limbs: 1,
        reps: 100,
        warmup: 10,
        plan: "prime32".into(),
        primes: None,
        prime_bits: 30,
    };
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < argv.len() {
        let key = argv[i].as_str();
        if key == "-h" || key == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        let val = argv
            .get(i + 1)
            .unwrap_or_else(|| fail(&format!("missing value for {key}")));
        let num = |v: &str| -> u64 {
            v.parse()
                .unwrap_or_else(|_| fail(&format!("bad number {v:?} for {key}")))
        };
        match key {
            "--log-n" => a.log_n = num(val) as u32,
            "--limbs" => a.limbs = num(val) as usize,
            "--reps" => a.reps = num(val) as usize,
            "--warmup" => a.warmup = num(val) as usize,
            "--plan" => a.plan = val.clone(),
            "--prime-bits" => a.prime_bits = num(val) as u32,
            "--primes" => {
                a.primes = Some(val.split(',').filter(|s| !s.is_empty()).map(num).collect())
            }
            _ => fail(&format!("unknown argument {key}")),
        }
        i += 2;
    }
    if !(5..=20).contains(&a.log_n) {
        fail("--log-n must be in 5..=20 (tfhe-ntt needs N >= 32)");
    }
    if a.limbs == 0 || a.reps == 0 {
        fail("--limbs and --reps must be positive");
    }
    if let Some(p) = &a.primes {
        if p.len() != a.limbs {
            fail(&format!(
                "--primes gives {} primes but --limbs is {}",
                p.len(),
                a.limbs
            ));
        }
    }
    a
}

// ------------------------------------------------------------------------------------------------
// primes (only used when the caller passes none)
// ------------------------------------------------------------------------------------------------

fn mul_mod(a: u64, b: u64, m: u64) -> u64 {
    ((a as u128 * b as u128) % m as u128) as u64
}

fn pow_mod(mut b: u64, mut e: u64, m: u64) -> u64 {
    let mut r = 1 % m;
    b %= m;
    while e > 0 {
        if e & 1 == 1 {
            r = mul_mod(r, b, m);
        }
        b = mul_mod(b, b, m);
        e >>= 1;
    }
    r
}

/// Deterministic Miller-Rabin for n < 2^64 (the first 12 prime bases suffice).
fn is_prime(n: u64) -> bool {
    const BASES: [u64; 12] = [2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37];
    if n < 2 {
        return false;
    }
    for &p in &BASES {
        if n.is_multiple_of(p) {
            return n == p;
        }
    }
    let (mut d, mut s) = (n - 1, 0);
    while d % 2 == 0 {
        d /= 2;
        s += 1;
    }
    'outer: for &a in &BASES {
        let mut x = pow_mod(a, d, n);
        if x == 1 || x == n - 1 {
            continue;
        }
        for _ in 1..s {
            x = mul_mod(x, x, n);
            if x == n - 1 {
                continue 'outer;
            }
        }
        return false;
    }
    true
}

/// The `k` largest primes p < 2^bits with p = 1 mod 2n, descending.
fn ntt_primes(bits: u32, n: u64, k: usize) -> Vec<u64> {
    let m = 2 * n;
    let mut p = ((1u64 << bits) - 1) / m * m + 1;
    let mut out = Vec::with_capacity(k);
    while out.len() < k && p > m {
        if is_prime(p) {
            out.push(p);
        }
        p -= m;
    }
    if out.len() < k {
        fail(&format!(
            "only {} NTT primes below 2^{bits} for N = {n}",
            out.len()
        ));
    }
    out
}

// ------------------------------------------------------------------------------------------------
// the two plan kinds behind one interface
// ------------------------------------------------------------------------------------------------

trait Limb {
    type W: Copy + PartialEq;
    fn fwd(&self, buf: &mut [Self::W]);
    fn inv(&self, buf: &mut [Self::W]);
    fn normalize(&self, buf: &mut [Self::W]);
    fn from_u64(x: u64) -> Self::W;
}

impl Limb for tfhe_ntt::prime32::Plan {
    type W = u32;
    fn fwd(&self, buf: &mut [u32]) {
        tfhe_ntt::prime32::Plan::fwd(self, buf)
    }
    fn inv(&self, buf: &mut [u32]) {
        tfhe_ntt::prime32::Plan::inv(self, buf)
    }
    fn normalize(&self, buf: &mut [u32]) {
        tfhe_ntt::prime32::Plan::normalize(self, buf)
    }
    fn from_u64(x: u64) -> u32 {
        x as u32
    }
}

impl Limb for tfhe_ntt::prime64::Plan {
    type W = u64;
    fn fwd(&self, buf: &mut [u64]) {
        tfhe_ntt::prime64::Plan::fwd(self, buf)
    }
    fn inv(&self, buf: &mut [u64]) {
        tfhe_ntt::prime64::Plan::inv(self, buf)
    }
    fn normalize(&self, buf: &mut [u64]) {
        tfhe_ntt::prime64::Plan::normalize(self, buf)
    }
    fn from_u64(x: u64) -> u64 {
        x
    }
}

/// splitmix64: reproducible non-cryptographic input data.
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

struct Timings {
    fwd_us: Vec<f64>,
    inv_us: Vec<f64>,
    roundtrip_ok: bool,
}

fn run<P: Limb>(plans: &[P], primes: &[u64], n: usize, reps: usize, warmup: usize) -> Timings {
    let mut rng = SplitMix(0x5EED);
    let original: Vec<Vec<P::W>> = primes
        .iter()
        .map(|&p| (0..n).map(|_| P::from_u64(rng.next() % p)).collect())
        .collect();

    // correctness: inv(fwd(x)) * N^-1 == x on every limb
    let mut bufs = original.clone();
    for (plan, buf) in plans.iter().zip(bufs.iter_mut()) {
        plan.fwd(buf);
        plan.inv(buf);
        plan.normalize(buf);
    }
    let roundtrip_ok = bufs == original;

    // Each repetition transforms every limb forward (timed), then back (timed), so the data stays
    // a valid residue vector throughout; the inverse output is not normalized (as in a real pipeline
    // the 1/N factor is folded into a later product).
    let mut fwd_us = Vec::with_capacity(reps);
    let mut inv_us = Vec::with_capacity(reps);
    for r in 0..warmup + reps {
        let t0 = Instant::now();
        for (plan, buf) in plans.iter().zip(bufs.iter_mut()) {
            plan.fwd(std::hint::black_box(buf));
        }
        let t1 = Instant::now();
        for (plan, buf) in plans.iter().zip(bufs.iter_mut()) {
            plan.inv(std::hint::black_box(buf));
        }
        let t2 = Instant::now();
        std::hint::black_box(&bufs);
        if r >= warmup {
            fwd_us.push((t1 - t0).as_secs_f64() * 1e6);
            inv_us.push((t2 - t1).as_secs_f64() * 1e6);
        }
    }
    Timings {
        fwd_us,
        inv_us,
        roundtrip_ok,
    }
}

fn stats(v: &mut [f64]) -> (f64, f64, f64) {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let m = v.len();
    let median = if m % 2 == 1 {
        v[m / 2]
    } else {
        0.5 * (v[m / 2 - 1] + v[m / 2])
    };
    (median, v[0], v[m - 1])
}

/// What the CPU offers (tfhe-ntt's runtime dispatch picks its AVX-512 kernels when "avx512" is listed and
/// the crate's default `avx512` feature is on, as here).
fn cpu_simd() -> &'static str {
    #[cfg(target_arch = "x86_64")]
    {
        let v4 = is_x86_feature_detected!("avx512f")
            && is_x86_feature_detected!("avx512bw")
            && is_x86_feature_detected!("avx512cd")
            && is_x86_feature_detected!("avx512dq")
            && is_x86_feature_detected!("avx512vl");
        if v4 && is_x86_feature_detected!("avx512ifma") {
            return "avx512+ifma";
        }
        if v4 {
            return "avx512";
        }
        if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
            return "avx2";
        }
    }
    "scalar"
}

fn no_plan(plan: &str, n: usize, p: u64) -> ! {
    fail(&format!(
        "no {plan} plan for N = {n}, p = {p} (is p prime with p = 1 mod 2N?)"
    ))
}

fn main() {
    let a = parse_args();
    let n = 1usize << a.log_n;
    let primes = match &a.primes {
        Some(p) => p.clone(),
        None => ntt_primes(a.prime_bits, n as u64, a.limbs),
    };
    let mut t = match a.plan.as_str() {
        "prime32" => {
            let plans: Vec<_> = primes
                .iter()
                .map(|&p| {
                    let p32 =
                        u32::try_from(p).unwrap_or_else(|_| fail(&format!("{p} does not fit u32")));
                    tfhe_ntt::prime32::Plan::try_new(n, p32)
                        .unwrap_or_else(|| no_plan(&a.plan, n, p))
                })
                .collect();
            run(&plans, &primes, n, a.reps, a.warmup)
        }
        "prime64" => {
            let plans: Vec<_> = primes
                .iter()
                .map(|&p| {
                    tfhe_ntt::prime64::Plan::try_new(n, p).unwrap_or_else(|| no_plan(&a.plan, n, p))
                })
                .collect();
            run(&plans, &primes, n, a.reps, a.warmup)
        }
        other => fail(&format!("unknown --plan {other}")),
    };
    let (fm, fmin, fmax) = stats(&mut t.fwd_us);
    let (im, imin, imax) = stats(&mut t.inv_us);
    let prime_list = primes
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    println!(
        "{{\"peer\": \"tfhe-ntt {}\", \"plan\": \"{}\", \"cpu_simd\": \"{}\", \"log_n\": {}, \"n\": {}, \
\"limbs\": {}, \"primes\": [{}], \"reps\": {}, \"warmup\": {}, \"threads\": 1, \
\"fwd_median_us\": {:.3}, \"fwd_min_us\": {:.3}, \"fwd_max_us\": {:.3}, \
\"inv_median_us\": {:.3}, \"inv_min_us\": {:.3}, \"inv_max_us\": {:.3}, \"roundtrip_ok\": {}}}",
        env!("TFHE_NTT_VERSION"),
        a.plan,
        cpu_simd(),
        a.log_n,
        n,
        a.limbs,
        prime_list,
        a.reps,
        a.warmup,
        fm,
        fmin,
        fmax,
        im,
        imin,
        imax,
        t.roundtrip_ok
    );
    if !t.roundtrip_ok {
        std::process::exit(1);
    }
}
