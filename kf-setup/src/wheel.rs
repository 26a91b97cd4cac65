//! Unpacking a wheel into an installation prefix laid out as pip lays out a virtual
//! environment: `NAME.data/data/X` to `PREFIX/X` (the Intel runtimes' `lib/`, `include/`),
//! `NAME.data/{purelib,platlib}/X` and the wheel's root files to `PREFIX/site-packages/X`
//! (NVIDIA's `nvidia/cuda_nvrtc/lib/`), `headers` to `include/`, `scripts` to `bin/`.

use std::fs::{self, File};
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error::{io_at, SetupError};

/// The folder under the prefix that holds a wheel's importable files.
pub const SITE_PACKAGES: &str = "site-packages";

/// Where an entry of a wheel goes under the prefix (`None` for a folder entry or an entry
/// that names no file).
fn destination(entry: &Path) -> Option<PathBuf> {
    let mut parts = entry.components();
    let first = match parts.next()? {
        Component::Normal(first) => first.to_str()?,
        _ => return None,
    };
    if first.ends_with(".data") {
        let scheme = match parts.next()? {
            Component::Normal(s) => s.to_str()?,
            _ => return None,
        };
        let rest: PathBuf = parts.collect();
        if rest.as_os_str().is_empty() {
            return None;
        }
        let base = match scheme {
            "data" => PathBuf::new(),
            "purelib" | "platlib" => PathBuf::from(SITE_PACKAGES),
            "headers" => PathBuf::from("include"),
            "scripts" => PathBuf::from("bin"),
            _ => return None,
        };
        return Some(base.join(rest));
    }
    Some(Path::new(SITE_PACKAGES).join(entry))
}

/// Unpacks every file of `wheel` under `prefix` (see the module docs), keeping the
/// executable bits. An entry that would land outside `prefix` (`..`, an absolute path) is
/// refused with [`SetupError::UnsafeEntry`].
pub fn unpack(wheel: &Path, prefix: &Path) -> Result<u64, SetupError> {
    let zip_error = |source| SetupError::Wheel {
        wheel: wheel.to_path_buf(),
        source,
    };
    let file = File::open(wheel).map_err(io_at(wheel))?;
    let mut archive = zip::ZipArchive::new(io::BufReader::new(file)).map_err(zip_error)?;
    let mut written = 0;
    for i in 0..archive.len() {
        let mut entry = archive.by_index(i).map_err(zip_error)?;
        if entry.is_dir() {
            continue;
        }
        let Some(relative) = entry.enclosed_name() else {
            return Err(SetupError::UnsafeEntry {
                wheel: wheel.to_path_buf(),
                entry: String::from_utf8_lossy(entry.name_raw()).into_owned(),
            });
        };
        let Some(target) = destination(&relative) else {
            continue;
        };
        let target = prefix.join(target);
        if let Some(parent) = target.parent() {
            fs::create_dir_all(parent).map_err(io_at(parent))?;
        }
        let mut out = File::create(&target).map_err(io_at(&target))?;
        written += io::copy(&mut entry, &mut out).map_err(io_at(&target))?;
        #[cfg(unix)]
        if let Some(mode) = entry.unix_mode() {
            use std::os::unix::fs::PermissionsExt;
            let mode = (mode & 0o777) | 0o600;
            fs::set_permissions(&target, fs::Permissions::from_mode(mode))
                .map_err(io_at(&target))?;
        }
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn wheel(dir: &Path, entries: &[(&str, &[u8])]) -> PathBuf {
        let path = dir.join("x-1.0-py3-none-any.whl");
        let mut zip = zip::ZipWriter::new(File::create(&path).unwrap());
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Stored)
            .unix_permissions(0o755);
        for (name, data) in entries {
            zip.start_file(*name, options).unwrap();
            zip.write_all(data).unwrap();
        }
        zip.finish().unwrap();
        path
    }

    #[test]
    fn lays_out_the_schemes_as_pip_does() {
        let dir = tempfile::tempdir().unwrap();
        let w = wheel(
            dir.path(),
            &[
                ("x-1.0.data/data/lib/libx.so", b"elf"),
                ("x-1.0.data/platlib/x/core.so", b"so"),
                ("nvidia/cuda_nvrtc/lib/libnvrtc.so.12", b"nvrtc"),
                ("x-1.0.dist-info/RECORD", b""),
            ],
        );
        let prefix = dir.path().join("prefix");
        assert_eq!(unpack(&w, &prefix).unwrap(), 10);
        assert_eq!(fs::read(prefix.join("lib/libx.so")).unwrap(), b"elf");
        assert!(prefix.join("site-packages/x/core.so").is_file());
        assert!(prefix
            .join("site-packages/nvidia/cuda_nvrtc/lib/libnvrtc.so.12")
            .is_file());
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = fs::metadata(prefix.join("lib/libx.so"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o755);
        }
    }

    #[test]
    fn an_entry_leaving_the_prefix_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let w = wheel(dir.path(), &[("../../escape.txt", b"x")]);
        let prefix = dir.path().join("a/b/prefix");
        assert!(matches!(
            unpack(&w, &prefix),
            Err(SetupError::UnsafeEntry { .. })
        ));
        assert!(!dir.path().join("a/escape.txt").exists());
        assert!(!dir.path().join("escape.txt").exists());
    }
}
