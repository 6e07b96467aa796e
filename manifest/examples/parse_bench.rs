//! Times the two manifest readers on one file: the line reader for sgard's
//! own layout (`fast.rs`) and serde-saphyr (which parses anything else).
//! BENCHMARKS.md records its numbers.
//!
//! `cargo run --release -p sgard-manifest --example parse_bench -- manifest.yaml`

use std::error::Error;
use std::time::Instant;

use sgard_manifest::Manifest;

fn main() -> Result<(), Box<dyn Error>> {
    let p = std::env::args()
        .nth(1)
        .ok_or("usage: parse_bench MANIFEST.yaml")?;
    let text = std::fs::read_to_string(&p)?;
    // A leading comment is outside the line reader's subset: serde-saphyr
    // parses that copy.
    let odd = format!("# a comment\n{text}");
    let (mut fast, mut slow) = (f64::MAX, f64::MAX);
    let mut entries = 0;
    for _ in 0..3 {
        let t = Instant::now();
        let m = Manifest::from_yaml(&text)?;
        fast = fast.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let m2 = Manifest::from_yaml(&odd)?;
        slow = slow.min(t.elapsed().as_secs_f64());
        if m != m2 {
            return Err("the two readers disagree".into());
        }
        entries = m.files.len();
    }
    println!(
        "{entries} entries, {} bytes: line reader {:.1} ms, serde-saphyr {:.1} ms (best of 3)",
        text.len(),
        fast * 1e3,
        slow * 1e3
    );
    Ok(())
}
