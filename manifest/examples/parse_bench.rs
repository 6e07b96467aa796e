//! Times the one YAML reader (serde-saphyr, then validation) against
//! decoding the same manifest from the binary codec that the machine-local
//! index and the cache of parsed snapshot documents hold. BENCHMARKS.md
//! records its numbers.
//!
//! `cargo run --release -p sgard-manifest --example parse_bench -- manifest.yaml`

use std::error::Error;
use std::time::Instant;

use sgard_manifest::{Manifest, codec};

fn main() -> Result<(), Box<dyn Error>> {
    let p = std::env::args()
        .nth(1)
        .ok_or("usage: parse_bench MANIFEST.yaml")?;
    let text = std::fs::read_to_string(&p)?;
    let (mut yaml, mut binary) = (f64::MAX, f64::MAX);
    let mut entries = 0;
    let mut encoded = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let m = Manifest::from_yaml(&text)?;
        yaml = yaml.min(t.elapsed().as_secs_f64());
        let bytes = codec::encode_manifest(&m);
        let t = Instant::now();
        let m2 = codec::decode_manifest(&bytes).ok_or("the codec did not decode its own bytes")?;
        binary = binary.min(t.elapsed().as_secs_f64());
        if m != m2 {
            return Err("the YAML and the codec disagree".into());
        }
        entries = m.files.len();
        encoded = bytes.len();
    }
    println!(
        "{entries} entries, {} bytes of YAML: parsed {:.1} ms; {encoded} bytes encoded: decoded {:.1} ms (best of 3)",
        text.len(),
        yaml * 1e3,
        binary * 1e3
    );
    Ok(())
}
