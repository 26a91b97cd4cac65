//! Launch and constraint expressions (`kf_manifest::Expr`): parsing, the variables they name,
//! and evaluation as an integer, a boolean and a launch size, against symbols holding
//! parameters of every kind, problem sizes and device facts. Inputs are bounded to 4 KiB (an
//! expression is one line of a manifest).

use crate::{device, sizes};
use kf_core::{ParamValue, ParamValues};
use kf_manifest::{Expr, ExprSite, Symbols};

/// The target: one input.
pub fn run(data: &[u8]) {
    if data.len() > 4096 {
        return;
    }
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let site = ExprSite {
        file: "fuzz.toml".into(),
        field: "constraints.rules[0]".into(),
    };
    let Ok(expr) = Expr::parse(text, &site) else {
        return;
    };
    assert_eq!(expr.text(), text);
    let _ = expr.variables().count();
    let params = ParamValues::new()
        .with("TS", ParamValue::Int(16))
        .with("WPT", ParamValue::Int(4))
        .with("VEC", ParamValue::Int(0))
        .with("F", ParamValue::Float(0.5))
        .with("USE_LOCAL", ParamValue::Bool(true))
        .with("LAYOUT", ParamValue::Text("row".into()));
    let mut symbols = Symbols::new()
        .with_device(&device())
        .with_sizes(&sizes())
        .with_params(&params);
    symbols.set_int("BIG", i64::MAX);
    symbols.set_int("SMALL", i64::MIN);
    symbols.set_float("NAN", f64::NAN);
    symbols.set_float("INF", f64::INFINITY);
    let _ = expr.eval_i64(&symbols, &site);
    let _ = expr.eval_bool(&symbols, &site);
    if let Ok(v) = expr.eval_positive(&symbols, &site) {
        assert!(v > 0);
    }
}
