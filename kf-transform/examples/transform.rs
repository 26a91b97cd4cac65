//! Writes the children of a kernel: `cargo run -p kf-transform --example transform --
//! KERNEL.toml OUT_DIR [NAME…]` applies each named transformation (all of them by default)
//! to the kernel at its first parameter values and writes `OUT_DIR/<name>.cl` and
//! `OUT_DIR/<name>.toml`, ready for `kf eval --task-file … --kernel OUT_DIR/<name>.toml`.

use std::path::PathBuf;

use kf_transform::Transformation;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let (Some(kernel), Some(out)) = (args.next(), args.next()) else {
        return Err("usage: transform KERNEL.toml OUT_DIR [NAME…]".into());
    };
    let names: Vec<String> = args.collect();
    let out = PathBuf::from(out);
    std::fs::create_dir_all(&out)?;
    let (manifest, source) = kf_manifest::Manifest::load(std::path::Path::new(&kernel))?;
    let params = manifest.default_params();
    for t in Transformation::ALL {
        if !names.is_empty() && !names.iter().any(|n| n == t.name()) {
            continue;
        }
        let Some(child) = t.apply(&source, &params)? else {
            println!("{t}: does not apply");
            continue;
        };
        std::fs::write(out.join(format!("{t}.cl")), child.source.text.as_bytes())?;
        let manifest = child.source.manifest.as_deref().unwrap_or_default();
        std::fs::write(
            out.join(format!("{t}.toml")),
            format!("source = \"{t}.cl\"\n{manifest}"),
        )?;
        println!("{t}: {} ({})", child.note, child.params);
    }
    Ok(())
}
