//! The run explorer: one self-contained `report.html` per run (`kf report`), and the same page
//! served live while a search writes to its run directory (`kf serve`, [`serve`], feature
//! `report`). The page and its data are kf-report's ([`kf_report::explorer`]).

pub use kf_report::explorer::*;

#[cfg(feature = "report")]
pub mod serve;
