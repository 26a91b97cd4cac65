//! Measures compile time against cache-hit time, and the GFLOP/s of a naive and a
//! local-memory-tiled SGEMM (512³ by default) on the selected OpenCL device.
//!
//! `cargo run --release -p kf-backend-opencl --example sgemm [-- N]`

use std::time::Instant;

use kf_backend_opencl::OpenClBackend;
use kf_core::prelude::*;

const NAIVE: &str = r#"
__kernel void sgemm(__global const float* A, __global const float* B, __global float* C, int N) {
    int col = get_global_id(0), row = get_global_id(1);
    float acc = 0.0f;
    for (int k = 0; k < N; k++) acc += A[row * N + k] * B[k * N + col];
    C[row * N + col] = acc;
}
"#;

const TILED: &str = r#"
__kernel void sgemm(__global const float* A, __global const float* B, __global float* C, int N) {
    __local float As[TS][TS];
    __local float Bs[TS][TS];
    int lc = get_local_id(0), lr = get_local_id(1);
    int col = get_global_id(0), row = get_global_id(1);
    float acc = 0.0f;
    for (int t = 0; t < N; t += TS) {
        As[lr][lc] = A[row * N + t + lc];
        Bs[lr][lc] = B[(t + lr) * N + col];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int k = 0; k < TS; k++) acc += As[lr][k] * Bs[k][lc];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    C[row * N + col] = acc;
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(512);
    let backend = OpenClBackend::new()?;
    println!(
        "device: {} ({})",
        backend.device().name,
        backend.device().platform
    );
    let a: Vec<f32> = (0..n * n).map(|i| ((i * 7) % 13) as f32 * 0.1).collect();
    let b: Vec<f32> = (0..n * n).map(|i| ((i * 5) % 11) as f32 * 0.1).collect();
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let mut ab = backend.alloc(n * n * 4)?;
    let mut bb = backend.alloc(n * n * 4)?;
    let cb = backend.alloc(n * n * 4)?;
    backend.write(&mut ab, &bytes(&a))?;
    backend.write(&mut bb, &bytes(&b))?;
    // Reference for a few entries.
    let reference = |r: usize, c: usize| (0..n).map(|k| a[r * n + k] * b[k * n + c]).sum::<f32>();

    for (name, src, params, local) in [
        ("naive", NAIVE, ParamValues::new(), [16usize, 16]),
        (
            "tiled TS=16",
            TILED,
            ParamValues::new().with("TS", 16i64),
            [16, 16],
        ),
    ] {
        let source = KernelSource::new(Language::OpenCl, "sgemm", src);
        let t = Instant::now();
        let compiled = backend.compile(&source, &params, &CompileOptions::default())?;
        let first = t.elapsed().as_secs_f64();
        let t = Instant::now();
        let again = backend.compile(&source, &params, &CompileOptions::default())?;
        let second = t.elapsed().as_secs_f64();
        println!(
            "{name}: compile() {:.1} ms (cache hit {}), again {:.1} ms (cache hit {})",
            first * 1e3,
            compiled.facts.cache_hit,
            second * 1e3,
            again.facts.cache_hit
        );
        let args = [
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
            KernelArg::I32(n as i32),
        ];
        let range = NdRange::new([n, n], local);
        backend.launch(&compiled.kernel, &args, &range)?; // warm-up
        let mut times: Vec<f64> = (0..5)
            .map(|_| {
                backend
                    .launch(&compiled.kernel, &args, &range)
                    .map(|t| t.device_seconds)
            })
            .collect::<Result<_, _>>()?;
        times.sort_by(f64::total_cmp);
        let median = times[times.len() / 2];
        let mut out = vec![0u8; n * n * 4];
        backend.read(&cb, &mut out)?;
        let c = |r: usize, col: usize| {
            let i = (r * n + col) * 4;
            f32::from_ne_bytes([out[i], out[i + 1], out[i + 2], out[i + 3]])
        };
        for (r, col) in [(0, 0), (n / 2, n / 3), (n - 1, n - 1)] {
            let want = reference(r, col);
            assert!(
                (c(r, col) - want).abs() <= 1e-3 * want.abs().max(1.0),
                "wrong result"
            );
        }
        println!(
            "{name}: {:.2} ms, {:.1} GFLOP/s",
            median * 1e3,
            2.0 * (n * n * n) as f64 / median / 1e9
        );
    }
    Ok(())
}
