//! Quick side-by-side timing of softmax kernels against the bandwidth roofline, timed the way
//! the evaluator times a candidate (three rotated copies of X, Y refilled from the host before
//! every launch, device-event seconds) but without its baseline and protocol: use `kf eval`
//! or the `softmax` example for the real measurement.
//!
//! Each item is either a template configuration, `MANIFEST.toml:K=V,K=V`, or a probe kernel
//! that moves the same bytes as a softmax (X read, Y written, one work-item per row, float16
//! along the row) doing less work: `probe:copy` (Y = X), `probe:max` (the row maximum, then
//! Y = X - max: two sweeps, the second from L1), `probe:exp` (Y = exp(X), one sweep),
//! `probe:exp2` (Y = exp2(X)), `probe:native_exp` (Y = native_exp(X)). Probes compile with
//! `-cl-fast-relaxed-math`. The items are timed round-robin, `--rounds` rounds of `--reps`
//! launches each, so that a shared machine's load falls on all of them alike; the median over
//! all launches and the best are printed, with GB/s (8 bytes per element) and the fraction of
//! the device's cached roofline for this working set (`kf characterise`).
//!
//! ```sh
//! cargo run --release -p kf-mutate --example softmax_bench -- [--rows 4096] [--cols 1024] \
//!     [--rounds 5] [--reps 7] probe:copy probe:exp \
//!     kf-mutate/templates/softmax_row.toml:VW=16,ALGO=3,WG=16,RPI=16 \
//!     kf-mutate/templates/softmax_row.toml:VW=16,ALGO=4,WG=16,RPI=1,ACC=8,PREFETCH_ROW=1
//! ```
//!
//! The first is the search's float16 start (the manifest's first values for the rest), the
//! second the start before it; `--rows 512` keeps the rows in cache, which times the
//! arithmetic alone.

use std::path::Path;

use kf_backend_opencl::OpenClBackend;
use kf_core::prelude::*;
use kf_manifest::Manifest;

/// The probe kernels: one work-item per row, float16 along the row.
const PROBES: &str = r#"
__kernel __attribute__((vec_type_hint(float16)))
void probe(const int ROWS, const int COLS, __global const float* X, __global float* Y) {
    const int r = get_global_id(0);
    if (r >= ROWS) {
        return;
    }
    __global const float* x = X + (long)r * COLS;
    __global float* y = Y + (long)r * COLS;
    const int n = COLS / 16;
#if PROBE == 1
    float16 m = (float16)(-INFINITY);
    for (int i = 0; i < n; ++i) {
        m = fmax(m, vload16(i, x));
    }
    float8 m8 = fmax(m.lo, m.hi);
    float4 m4 = fmax(m8.lo, m8.hi);
    float2 m2 = fmax(m4.lo, m4.hi);
    const float mx = fmax(m2.x, m2.y);
#endif
    for (int i = 0; i < n; ++i) {
        const float16 v = vload16(i, x);
#if PROBE == 0
        vstore16(v, i, y);
#elif PROBE == 1
        vstore16(v - mx, i, y);
#elif PROBE == 2
        vstore16(exp(v), i, y);
#elif PROBE == 3
        vstore16(exp2(v), i, y);
#else
        vstore16(native_exp(v), i, y);
#endif
    }
}
"#;

fn parse_kv(s: &str) -> Vec<(String, String)> {
    s.split(',')
        .filter(|p| !p.is_empty())
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// One kernel to time: its name, compiled kernel, launch range and reference (None: a probe
/// whose output is not a softmax).
struct Item {
    name: String,
    kernel: <OpenClBackend as Backend>::Kernel,
    range: NdRange,
    is_softmax: bool,
    times: Vec<f64>,
}

fn take_flag(args: &mut Vec<String>, flag: &str, default: usize) -> usize {
    match args.iter().position(|a| a == flag) {
        Some(i) => {
            let value = args
                .get(i + 1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default);
            args.drain(i..(i + 2).min(args.len()));
            value
        }
        None => default,
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let rows = take_flag(&mut args, "--rows", 4096);
    let cols = take_flag(&mut args, "--cols", 1024);
    let rounds = take_flag(&mut args, "--rounds", 5);
    let reps = take_flag(&mut args, "--reps", 7);
    if args.is_empty() {
        return Err(
            "usage: softmax_bench [--rows R] [--cols C] [--rounds N] [--reps N] \
                    probe:copy|probe:max|probe:exp|probe:exp2|probe:native_exp|MANIFEST:K=V,… …"
                .into(),
        );
    }
    let backend = OpenClBackend::new()?;
    let facts = backend.device().clone();
    let sizes: indexmap::IndexMap<String, i64> = [("ROWS", rows), ("COLS", cols)]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v as i64))
        .collect();

    // X: a deterministic spread over [-8, 8), shifted by 60 on every third row (the
    // evaluator's shifted input set: a kernel without the max subtraction overflows).
    let elements = rows * cols;
    let x: Vec<f32> = (0..elements)
        .map(|i| {
            let h = (i as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40;
            let v = (h % 16_000) as f32 / 1000.0 - 8.0;
            if (i / cols) % 3 == 2 {
                v + 60.0
            } else {
                v
            }
        })
        .collect();
    let mut reference = vec![0f32; elements];
    for (xr, yr) in x.chunks_exact(cols).zip(reference.chunks_exact_mut(cols)) {
        let mx = xr.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = xr.iter().map(|&v| (v as f64 - mx).exp()).sum();
        for (o, &v) in yr.iter_mut().zip(xr) {
            *o = ((v as f64 - mx).exp() / sum) as f32;
        }
    }
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
    let x_bytes = bytes(&x);
    let zeros = vec![0u8; elements * 4];
    const COPIES: usize = 3;
    let mut sets = Vec::new();
    for _ in 0..COPIES {
        let mut xb = backend.alloc(elements * 4)?;
        backend.write(&mut xb, &x_bytes)?;
        let yb = backend.alloc(elements * 4)?;
        sets.push((xb, yb));
    }

    let mut items = Vec::new();
    for spec in &args {
        let (source, params, flags, range, is_softmax) =
            if let Some(probe) = spec.strip_prefix("probe:") {
                let code = match probe {
                    "copy" => 0,
                    "max" => 1,
                    "exp" => 2,
                    "exp2" => 3,
                    "native_exp" => 4,
                    other => return Err(format!("unknown probe {other}").into()),
                };
                let source = KernelSource::new(Language::OpenCl, "probe", PROBES);
                let mut params = ParamValues::new();
                params.set("PROBE", ParamValue::Int(code));
                let range = NdRange::new([rows.div_ceil(16) * 16], [16]);
                (
                    source,
                    params,
                    vec!["-cl-fast-relaxed-math".to_owned()],
                    range,
                    false,
                )
            } else {
                let (path, cfg) = spec.split_once(':').unwrap_or((spec, ""));
                let (manifest, source) = Manifest::load(Path::new(path))?;
                let mut overrides = ParamValues::new();
                for (key, v) in parse_kv(cfg) {
                    overrides.set(key, ParamValue::Int(v.parse()?));
                }
                let params = manifest.resolve_params(&overrides)?;
                let symbols = manifest.symbols(&params, &sizes, &facts);
                manifest.check_constraints(&params, &symbols)?;
                let range = manifest.launch_range(&symbols)?;
                let flags = manifest.compile_flags(&params)?;
                (source, params, flags, range, true)
            };
        let options = CompileOptions {
            flags,
            ..CompileOptions::default()
        };
        let compiled = backend.compile(&source, &params, &options)?;
        items.push(Item {
            name: if is_softmax {
                format!("{} {params}", spec.split(':').next().unwrap_or(spec))
            } else {
                spec.clone()
            },
            kernel: compiled.kernel,
            range,
            is_softmax,
            times: Vec::new(),
        });
    }

    let launch = |item: &Item, set: &mut (<OpenClBackend as Backend>::Buffer, _)| {
        backend.write(&mut set.1, &zeros)?;
        let args = [
            KernelArg::I32(rows as i32),
            KernelArg::I32(cols as i32),
            KernelArg::Buffer {
                buffer: &set.0,
                offset: 0,
            },
            KernelArg::Buffer {
                buffer: &set.1,
                offset: 0,
            },
        ];
        backend
            .launch(&item.kernel, &args, &item.range)
            .map(|l| l.device_seconds)
    };

    // Correctness first (softmax items only).
    let mut errors = Vec::new();
    for item in &items {
        launch(item, &mut sets[0])?;
        let mut out = vec![0u8; elements * 4];
        backend.read(&sets[0].1, &mut out)?;
        let mut max_rel = 0f64;
        if item.is_softmax {
            for (chunk, &want) in out.chunks_exact(4).zip(&reference) {
                let v = f32::from_ne_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]) as f64;
                let rel = (v - want as f64).abs() / (want as f64).abs().max(1e-30);
                max_rel = if rel.is_nan() {
                    f64::INFINITY
                } else {
                    max_rel.max(rel)
                };
            }
        }
        errors.push(max_rel);
    }

    let mut copy = 0;
    for _ in 0..rounds {
        for item in &mut items {
            launch(item, &mut sets[copy % COPIES])?; // warm-up of this round
            copy += 1;
            for _ in 0..reps {
                let t = launch(item, &mut sets[copy % COPIES])?;
                copy += 1;
                item.times.push(t);
            }
        }
    }

    let moved = 8.0 * elements as f64;
    let roofline = kf_eval::characterise::Peaks::for_device("opencl", &facts)
        .filter(|p| p.measured)
        .map(|p| p.gbs_for(moved));
    match roofline {
        Some(gbs) => {
            println!("roofline for {moved:.0} bytes: {gbs:.1} GB/s (cached characterisation)")
        }
        None => {
            println!("no cached characterisation: run `kf characterise` for roofline fractions")
        }
    }
    for (item, err) in items.iter_mut().zip(errors) {
        item.times.sort_by(f64::total_cmp);
        let median = item.times[item.times.len() / 2];
        let best = item.times[0];
        let gbs = moved / median / 1e9;
        let fraction = roofline.map_or(String::new(), |r| format!("{:.2}", gbs / r));
        println!(
            "{:70} {:7.3} ms (best {:7.3}) {:6.1} GB/s {:>5} {}",
            item.name,
            median * 1e3,
            best * 1e3,
            gbs,
            fraction,
            if item.is_softmax {
                format!("max rel err {err:.1e}")
            } else {
                String::new()
            }
        );
    }
    Ok(())
}
