//! Lists the OpenCL devices this crate finds and the facts of the one it would pick.
//!
//! `cargo run -p kf-backend-opencl --example devices`

use kf_backend_opencl::{list_devices, runtime, OpenClBackend};
use kf_core::Backend;

fn main() {
    let info = runtime::prepare();
    println!("runtime: {}", info.describe());
    for (k, v) in &info.set_vars {
        println!("  set {k}={v}");
    }
    let devices = match list_devices() {
        Ok(d) => d,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    };
    for d in &devices {
        println!("device {d}");
    }
    match OpenClBackend::new() {
        Ok(backend) => {
            let mut facts = backend.device().clone();
            facts.extra.shift_remove("extensions");
            println!("selected: {}", backend.device_info());
            println!(
                "compile cache: {:?}",
                backend.cache().map(|c| c.dir().to_owned())
            );
            println!("buffer alignment: {} bytes", backend.buffer_alignment());
            println!("{facts:#?}");
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
