//! The installer end to end against a package index served on 127.0.0.1 (PEP 691 JSON pages
//! and wheels made here): what it writes, that a second run downloads nothing, and that a
//! download whose sha256 differs from the index's leaves nothing behind.

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use kf_setup::{Description, Installer, Outcome, PackageIndex, SetupError};
use sha2::{Digest, Sha256};

/// A wheel holding `files` (name, contents), as bytes.
fn wheel(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(0o755);
        for (name, data) in files {
            zip.start_file(*name, options).unwrap();
            zip.write_all(data).unwrap();
        }
        zip.finish().unwrap();
    }
    out.into_inner()
}

fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Serves `pages` (path → body) until the test ends; counts wheel downloads.
fn serve(pages: Vec<(String, Vec<u8>)>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/simple/", listener.local_addr().unwrap());
    let downloads = Arc::new(AtomicUsize::new(0));
    let counter = downloads.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request = String::new();
            reader.read_line(&mut request).unwrap();
            // The headers, up to the blank line.
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap() > 2 {
                line.clear();
            }
            let path = request.split_whitespace().nth(1).unwrap_or("").to_owned();
            let found = pages.iter().find(|(p, _)| *p == path);
            if path.ends_with(".whl") {
                counter.fetch_add(1, Ordering::SeqCst);
            }
            let (status, body): (&str, &[u8]) = match found {
                Some((_, body)) => ("200 OK", body),
                None => ("404 Not Found", b""),
            };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = stream.write_all(body);
        }
    });
    (base, downloads)
}

/// A project page listing one wheel at `url` with `digest`.
fn page(filename: &str, url: &str, digest: &str) -> Vec<u8> {
    serde_json::json!({
        "meta": {"api-version": "1.1"},
        "files": [{"filename": filename, "url": url, "hashes": {"sha256": digest}, "yanked": false}],
    })
    .to_string()
    .into_bytes()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn installs_once_and_refuses_a_wheel_whose_hash_differs() {
    let opencl_wheel = wheel(&[
        (
            "intel_opencl_rt-1.0.data/data/lib/libintelocl.so",
            b"driver",
        ),
        (
            "intel_opencl_rt-1.0.data/data/lib/libOpenCL.so.1",
            b"loader",
        ),
        ("intel_opencl_rt-1.0.dist-info/RECORD", b""),
    ]);
    let cuda_wheel = wheel(&[("nvidia/cuda_nvrtc/lib/libnvrtc.so.12", b"nvrtc")]);
    let opencl_name = "intel_opencl_rt-1.0-py3-none-manylinux_2_28_x86_64.whl";
    let cuda_name = format!(
        "nvidia_cuda_nvrtc_cu12-12.9.1-py3-none-manylinux_2_28_{}.whl",
        std::env::consts::ARCH
    );
    let opencl_name_here = opencl_name.replace("x86_64", std::env::consts::ARCH);
    let (base, downloads) = serve(vec![
        (
            "/simple/intel-opencl-rt/".into(),
            page(
                &opencl_name_here,
                "../../files/opencl.whl",
                &sha256(&opencl_wheel),
            ),
        ),
        ("/files/opencl.whl".into(), opencl_wheel.clone()),
        (
            "/simple/nvidia-cuda-nvrtc-cu12/".into(),
            // Not the wheel's digest: a corrupted or tampered download.
            page(&cuda_name, "../../files/cuda.whl", &sha256(b"another file")),
        ),
        ("/files/cuda.whl".into(), cuda_wheel),
    ]);
    let description = Description::parse(
        "schema = 1\n\
         [runtime.opencl]\nsummary = \"o\"\npackages = [\"intel-opencl-rt==1.0\"]\n\
         [runtime.cuda]\nsummary = \"c\"\npackages = [\"nvidia-cuda-nvrtc-cu12==12.9.*\"]\n",
    )
    .unwrap();
    let root = tempfile::tempdir().unwrap();
    let lines = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    let mut installer = Installer::new(root.path())
        .with_index(PackageIndex::new(&base).unwrap())
        .with_progress(move |l| sink.lock().unwrap().push(l.to_owned()));

    let config = root.path().join("opencl.json");
    let outcome = installer
        .install_with_requirements(&description, "opencl")
        .unwrap();
    assert_eq!(outcome, [Outcome::Installed(config.clone())]);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    let icd = PathBuf::from(json["icd"].as_str().unwrap());
    assert_eq!(icd, root.path().join("opencl/lib/libintelocl.so"));
    assert_eq!(std::fs::read(&icd).unwrap(), b"driver");
    let vendors = PathBuf::from(json["vendors_dir"].as_str().unwrap());
    assert_eq!(
        std::fs::read_to_string(vendors.join("intel-cpu.icd")).unwrap(),
        format!("{}\n", icd.display())
    );
    assert_eq!(
        json["packages"],
        serde_json::json!(["intel-opencl-rt==1.0"])
    );
    // What a backend reads: the per-user folder's opencl.json, parsed as kf-backend-opencl does.
    let found = kf_backend_common::runtime::discover_config_from(
        "opencl.json",
        &[],
        Some(root.path()),
        Path::new("/nonexistent"),
    );
    assert_eq!(found, Some(config.clone()));
    assert_eq!(downloads.load(Ordering::SeqCst), 1);

    // Again: already installed, nothing downloaded.
    let again = installer
        .install_with_requirements(&description, "opencl")
        .unwrap();
    assert_eq!(again, [Outcome::AlreadyInstalled(config)]);
    assert_eq!(downloads.load(Ordering::SeqCst), 1);

    // A wheel whose sha256 is not the index's: a typed error, and no trace of the runtime.
    let err = installer
        .install_with_requirements(&description, "cuda")
        .unwrap_err();
    assert!(matches!(err, SetupError::HashMismatch { .. }), "{err}");
    assert_eq!(
        names_in(root.path()),
        [".setup.lock", "opencl", "opencl.json"]
    );
    let progress = lines.lock().unwrap().join("\n");
    assert!(
        progress.contains("opencl: downloading intel-opencl-rt 1.0"),
        "{progress}"
    );
}
