//! Quick GEMM timing of template configurations, without the evaluator's baseline and
//! verification protocol (use `kf eval` for the real measurement).
//!
//! `cargo run --release -p kf-mutate --example bench -- MANIFEST.toml M=1024,N=1024,K=1024 \
//!  [--reps 7] "TM=4,TN=8" "TM=8,TN=8" …`

use std::path::Path;

use kf_backend_opencl::OpenClBackend;
use kf_core::prelude::*;
use kf_manifest::Manifest;

fn parse_kv(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut reps = 7usize;
    if let Some(i) = args.iter().position(|a| a == "--reps") {
        reps = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(7);
        args.drain(i..=i + 1);
    }
    let manifest_path = args
        .first()
        .ok_or("usage: bench MANIFEST SIZES [CONFIG…]")?;
    let sizes_text = args.get(1).ok_or("usage: bench MANIFEST SIZES [CONFIG…]")?;
    let (manifest, source) = Manifest::load(Path::new(manifest_path))?;
    let sizes: indexmap::IndexMap<String, i64> = parse_kv(sizes_text)
        .into_iter()
        .map(|(k, v)| (k, v.parse().unwrap_or(0)))
        .collect();
    let (m, n, k) = (
        sizes["M"] as usize,
        sizes["N"] as usize,
        sizes["K"] as usize,
    );
    let backend = OpenClBackend::new()?;
    if std::env::var_os("BENCH_FACTS").is_some() {
        eprintln!("{:#?}", backend.device());
    }
    let a: Vec<f32> = (0..m * k)
        .map(|i| ((i * 7 + 3) % 13) as f32 * 0.1)
        .collect();
    let b: Vec<f32> = (0..k * n)
        .map(|i| ((i * 5 + 1) % 11) as f32 * 0.1)
        .collect();
    let mut reference = vec![0f32; m * n];
    for r in 0..m {
        for kk in 0..k {
            let av = a[r * k + kk];
            let row = &mut reference[r * n..(r + 1) * n];
            for (c, out) in row.iter_mut().enumerate() {
                *out += av * b[kk * n + c];
            }
        }
    }
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let mut ab = backend.alloc(m * k * 4)?;
    let mut bb = backend.alloc(k * n * 4)?;
    let mut cb = backend.alloc(m * n * 4)?;
    backend.write(&mut ab, &bytes(&a))?;
    backend.write(&mut bb, &bytes(&b))?;
    let configs: Vec<String> = if args.len() > 2 {
        args[2..].to_vec()
    } else {
        vec![String::new()]
    };
    for cfg in configs {
        let mut overrides = ParamValues::new();
        for (key, v) in parse_kv(&cfg) {
            let value = match v.parse::<i64>() {
                Ok(i) => ParamValue::Int(i),
                Err(_) => ParamValue::Text(v),
            };
            overrides.set(key, value);
        }
        let params = match manifest.resolve_params(&overrides) {
            Ok(p) => p,
            Err(e) => {
                println!("{cfg:40} invalid: {e}");
                continue;
            }
        };
        let symbols = manifest.symbols(&params, &sizes, backend.device());
        if let Err(e) = manifest.check_constraints(&params, &symbols) {
            println!("{params:40} constraint: {e}");
            continue;
        }
        let range = manifest.launch_range(&symbols)?;
        let compiled = match backend.compile(&source, &params, &CompileOptions::default()) {
            Ok(c) => c,
            Err(e) => {
                println!("{params:40} compile error: {e}");
                continue;
            }
        };
        backend.write(&mut cb, &vec![0xffu8; m * n * 4])?;
        let args = [
            KernelArg::I32(m as i32),
            KernelArg::I32(n as i32),
            KernelArg::I32(k as i32),
            KernelArg::Buffer {
                buffer: &ab,
                offset: 0,
            },
            KernelArg::Buffer {
                buffer: &bb,
                offset: 0,
            },
            KernelArg::Buffer {
                buffer: &cb,
                offset: 0,
            },
        ];
        backend.launch(&compiled.kernel, &args, &range)?;
        let mut out = vec![0u8; m * n * 4];
        backend.read(&cb, &mut out)?;
        let mut max_rel = 0f64;
        for (i, chunk) in out.chunks_exact(4).enumerate() {
            let v = f32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) as f64;
            let want = reference[i] as f64;
            let rel = (v - want).abs() / want.abs().max(1e-3);
            if rel.is_nan() || rel > max_rel {
                max_rel = if rel.is_nan() { f64::INFINITY } else { rel };
            }
        }
        let mut times = Vec::new();
        for _ in 0..reps {
            times.push(
                backend
                    .launch(&compiled.kernel, &args, &range)?
                    .device_seconds,
            );
        }
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let best = times[0];
        let flops = 2.0 * (m * n * k) as f64;
        println!(
            "{:40} {:8.2} ms  {:6.1} GFLOP/s (best {:6.1})  err {:.1e} {}",
            params.to_string(),
            median * 1e3,
            flops / median / 1e9,
            flops / best / 1e9,
            max_rel,
            if max_rel < 1e-3 { "ok" } else { "WRONG" }
        );
    }
    Ok(())
}
