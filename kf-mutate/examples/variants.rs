//! Writes every structural variant of the shipped templates (source and manifest) to a folder,
//! to read them or feed them to a classifier.
//!
//! `cargo run -p kf-mutate --example variants -- OUT_DIR`

use std::path::PathBuf;

use kf_mutate::TemplateLibrary;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "variants".into()));
    std::fs::create_dir_all(&out)?;
    let library = TemplateLibrary::builtin()?;
    for template in library.templates() {
        // Every combination of switch values.
        let structures = template.all_structures();
        let mut written = 0;
        for structure in structures {
            let Ok(variant) = template.instantiate(&structure) else {
                continue;
            };
            let stem = format!(
                "{}__{}",
                template.name(),
                structure.to_string().replace(['=', ','], "_")
            );
            std::fs::write(
                out.join(format!("{stem}.cl")),
                variant.source.text.as_bytes(),
            )?;
            let manifest = variant.source.manifest.as_deref().unwrap_or("");
            std::fs::write(
                out.join(format!("{stem}.toml")),
                format!("source = \"{stem}.cl\"\n{manifest}"),
            )?;
            written += 1;
        }
        println!("{}: {written} variants", template.name());
    }
    Ok(())
}
