//! Helpers shared by the two binaries (`tfhers_peer`, `integers`): JSON text, timing, the tfhe version,
//! and the description of a KS-PBS parameter set. Included as a module by each (`mod common;`).

use std::time::Instant;

use tfhe::shortint::parameters::{ClassicPBSParameters, DynamicDistribution, ModulusSwitchType};

/// The `--key value` pairs of the command line, in order. `-h` or `--help` prints `usage` and exits;
/// a key without a value goes to `fail`.
pub fn flag_pairs(usage: &str, fail: fn(&str) -> !) -> Vec<(String, String)> {
    let mut argv = std::env::args().skip(1);
    let mut pairs = Vec::new();
    while let Some(key) = argv.next() {
        if key == "-h" || key == "--help" {
            println!("{usage}");
            std::process::exit(0);
        }
        let val = argv
            .next()
            .unwrap_or_else(|| fail(&format!("missing value for {key}")));
        pairs.push((key, val));
    }
    pairs
}

/// The non-empty items of a comma-separated list.
pub fn csv(val: &str) -> Vec<String> {
    val.split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .collect()
}

/// The tfhe version resolved in Cargo.lock (embedded at compile time).
pub fn tfhe_version() -> String {
    let lock = include_str!("../Cargo.lock");
    let mut in_tfhe = false;
    for line in lock.lines().map(str::trim) {
        if line == "[[package]]" {
            in_tfhe = false;
        } else if line == "name = \"tfhe\"" {
            in_tfhe = true;
        } else if in_tfhe {
            if let Some(v) = line.strip_prefix("version = ") {
                return v.trim_matches('"').to_string();
            }
        }
    }
    "unknown".into()
}

pub fn json_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

pub fn json_f(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.4}")
    } else {
        "null".into()
    }
}

/// `{"k": v, ...}` from (key, already-JSON value) pairs.
pub fn json_obj(fields: &[(&str, String)]) -> String {
    let body: Vec<String> = fields
        .iter()
        .map(|(k, v)| format!("{}: {v}", json_str(k)))
        .collect();
    format!("{{{}}}", body.join(", "))
}

pub fn noise_desc(d: &DynamicDistribution<u64>) -> String {
    match d {
        DynamicDistribution::TUniform(t) => format!("tuniform(bound_log2={})", t.bound_log2()),
        DynamicDistribution::Gaussian(g) => format!("gaussian(std={:e})", g.std),
    }
}

pub fn ms_desc(m: &ModulusSwitchType) -> &'static str {
    match m {
        ModulusSwitchType::Standard => "standard",
        ModulusSwitchType::DriftTechniqueNoiseReduction(_) => "drift_technique",
        ModulusSwitchType::CenteredMeanNoiseReduction => "centered_mean",
    }
}

/// The fields describing a KS-PBS parameter set, as (key, JSON value) pairs.
pub fn param_fields(p: &ClassicPBSParameters) -> Vec<(&'static str, String)> {
    vec![
        ("message_modulus", p.message_modulus.0.to_string()),
        ("carry_modulus", p.carry_modulus.0.to_string()),
        ("log2_p_fail", json_f(p.log2_p_fail)),
        ("lwe_dimension", p.lwe_dimension.0.to_string()),
        ("glwe_dimension", p.glwe_dimension.0.to_string()),
        ("polynomial_size", p.polynomial_size.0.to_string()),
        ("pbs_base_log", p.pbs_base_log.0.to_string()),
        ("pbs_level", p.pbs_level.0.to_string()),
        ("ks_base_log", p.ks_base_log.0.to_string()),
        ("ks_level", p.ks_level.0.to_string()),
        (
            "lwe_noise",
            json_str(&noise_desc(&p.lwe_noise_distribution)),
        ),
        (
            "glwe_noise",
            json_str(&noise_desc(&p.glwe_noise_distribution)),
        ),
        (
            "modulus_switch",
            json_str(ms_desc(&p.modulus_switch_noise_reduction_params)),
        ),
    ]
}

/// The bootstrapping and key-switching keys' sizes from the parameters: n GGSWs of l (k+1)^2 N words (the
/// Fourier form stores N/2 complex f64, the same 8 N bytes per polynomial); k N inputs x l_ks LWEs of n+1 u64.
pub fn key_bytes_from_params(p: &ClassicPBSParameters) -> (u64, u64) {
    let (n, k, big_n) = (
        p.lwe_dimension.0 as u64,
        p.glwe_dimension.0 as u64,
        p.polynomial_size.0 as u64,
    );
    let (l_pbs, l_ks) = (p.pbs_level.0 as u64, p.ks_level.0 as u64);
    (
        n * l_pbs * (k + 1) * (k + 1) * big_n * 8,
        k * big_n * l_ks * (n + 1) * 8,
    )
}

pub fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        0.5 * (s[n / 2 - 1] + s[n / 2])
    }
}
