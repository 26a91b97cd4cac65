//! What a live tuning run tunes, and how ([`LiveTuneOptions`]).

use std::path::PathBuf;

/// What a live tuning run evaluates before the strategy proposes anything.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TuneStart {
    /// The manifest's default configuration.
    #[default]
    Defaults,
    /// Nothing: the strategy chooses every configuration.
    None,
}

impl TuneStart {
    /// The name `--start` takes and the summary records.
    pub fn name(self) -> &'static str {
        match self {
            TuneStart::Defaults => "defaults",
            TuneStart::None => "none",
        }
    }
}

/// A live tuning run of one kernel (`kf tune --kernel K.toml ...`); [`LiveTuneOptions::new`]
/// gives `kf tune`'s defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveTuneOptions {
    /// Built-in task (exactly one of this and `task_file`).
    pub task: Option<String>,
    /// A task file.
    pub task_file: Option<PathBuf>,
    /// Problem sizes, such as `M=1024,N=1024,K=1024` (missing ones take the task's defaults).
    pub size: String,
    /// The kernel's manifest; its `[params]` and `[constraints]` define the space.
    pub kernel: PathBuf,
    /// Strategy name (`kf_tune::strategy::by_name`).
    pub strategy: String,
    /// Distinct configurations to evaluate (cache hits are free).
    pub budget: usize,
    /// Random seed.
    pub seed: u64,
    /// Kernel Tuner cache file to append to and resume from (default:
    /// `runs/tune/<kernel>_<task>_<sizes>.json`).
    pub cache: Option<PathBuf>,
    /// The backend's name (a shipped backend's: [`crate::backends::factory_for`]).
    pub backend: String,
    /// Device selector of the backend.
    pub device: Option<String>,
    /// Time every configuration in full and the baseline in every evaluation.
    pub full_timing: bool,
    /// Configurations compiled at once before they are timed one after another (1: off).
    pub compile_ahead: usize,
    /// What is evaluated before the strategy proposes anything.
    pub start: TuneStart,
}

impl LiveTuneOptions {
    /// Tuning `kernel` with `kf tune`'s defaults (no task yet: set `task` or `task_file`).
    pub fn new(kernel: impl Into<PathBuf>) -> Self {
        LiveTuneOptions {
            task: None,
            task_file: None,
            size: String::new(),
            kernel: kernel.into(),
            strategy: "default".to_owned(),
            budget: 30,
            seed: 0,
            cache: None,
            backend: crate::backends::DEFAULT_BACKEND.to_owned(),
            device: None,
            full_timing: false,
            compile_ahead: 2,
            start: TuneStart::Defaults,
        }
    }
}
