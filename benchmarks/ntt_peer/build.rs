//! Records the resolved tfhe-ntt version (from Cargo.lock) so the JSON line names the exact peer.
use std::{env, fs, path::Path};

fn main() {
    let lock = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap()).join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    let text = fs::read_to_string(&lock).unwrap_or_default();
    let mut version = String::from("unknown");
    let mut in_pkg = false;
    for line in text.lines() {
        let line = line.trim();
        if line == "[[package]]" {
            in_pkg = false;
        } else if line == "name = \"tfhe-ntt\"" {
            in_pkg = true;
        } else if in_pkg && line.starts_with("version = ") {
            version = line
                .trim_start_matches("version = ")
                .trim_matches('"')
                .to_string();
            break;
        }
    }
    println!("cargo:rustc-env=TFHE_NTT_VERSION={version}");
}
