//! How candidates are timed: rotated copies of the inputs, baseline launches interleaved with
//! the candidate's, every timed output checked again afterwards. What it is configured by is
//! `timing_config`.

use std::time::Instant;

use kf_core::{Backend, KernelArg, Status, TimingStats};

use super::timing_config::{
    baseline_every, first_baseline_trials, more_baseline, Timed, TimingConfig,
    FIRST_BASELINE_MIN_TRIALS,
};
use super::{
    buffer_arg, check_after_launch, kernel_args, load, payload, value_arg, Baseline,
    KernelEvaluator, Prepared,
};
use crate::early_stop::measures_baseline;
use crate::guarded::{alloc_guarded, backend_failure, fill, Failure, Guarded};
use crate::profile::since;
use crate::sequence::{alloc_scratch, check_scratch_after, poison_scratch};
use crate::task::{ArgSpec, BufferSpec, Role};

impl<B: Backend> KernelEvaluator<B> {
    /// Times the candidate on the prepared set, rotating copies of its inputs and interleaving
    /// baseline launches; then checks that every timed output is still correct.
    pub(super) fn time(
        &mut self,
        kernels: &[B::Kernel],
        p: &mut Prepared<'_, B::Buffer>,
        baseline_key: Option<&str>,
    ) -> Result<Timed, Failure> {
        let t = self.config.timing.clone();
        let backend = &self.backend;
        let specs = p.task.buffers();
        let sets = rotation_sets(backend, p, &specs, t.rotation)?;
        let baseline = baseline_key.and_then(|k| self.baselines.get_mut(k));
        let baseline = baseline_to_measure(baseline, &t);
        let schedule = BaselineSchedule::new(&t, baseline.as_deref());
        // The baseline writes into buffers of its own (and a sequence's scratch of its own).
        let baseline = baseline
            .map(|b| BaselineRun::new(backend, b, &specs, t.baseline_window))
            .transpose()?;
        let mut run = TimedRun {
            candidate: CandidateRun {
                backend,
                kernels,
                p: &*p,
                specs: &specs,
                flush_caches: t.flush_caches,
            },
            baseline,
            schedule,
            copies: sets.len(),
            sets,
            baseline_done: 0,
            baseline_seconds: 0.0,
        };
        let trials = run.trials(&t)?;
        let mut sets = run.sets;
        self.profile.baseline_s += trials.baseline_seconds;
        if let Some(launches) = trials.baseline_launches {
            self.profile.baseline_launches += launches;
        }
        self.profile.trials = u32::try_from(trials.samples.len()).unwrap_or(u32::MAX);
        self.profile.kernel_s = trials.total;
        self.profile.stopped_early = trials.stopped_early.is_some();
        self.early_stop_p = trials.stopped_early;
        check_timed_copies(&self.backend, p, &specs, &sets, trials.samples.len())?;
        p.buffers = sets.swap_remove(0);
        let baseline_stats = baseline_key
            .and_then(|k| self.baselines.get(k))
            .and_then(|b| {
                TimingStats::from_samples(&b.samples.iter().copied().collect::<Vec<_>>())
            });
        Ok((trials.samples, baseline_stats))
    }
}

/// The rotation copies of the prepared set's buffers: copy 0 is the verified set itself
/// (taken out of `p` until the timing gives it back); the others hold the same inputs in
/// other memory.
fn rotation_sets<B: Backend>(
    backend: &B,
    p: &mut Prepared<'_, B::Buffer>,
    specs: &[BufferSpec],
    rotation: usize,
) -> Result<Vec<Vec<Guarded<B::Buffer>>>, Failure> {
    let bytes_per_copy: usize = specs.iter().map(BufferSpec::bytes).sum();
    let copies = crate::rotation::rotation_copies(bytes_per_copy, rotation);
    let mut sets: Vec<Vec<Guarded<B::Buffer>>> = vec![std::mem::take(&mut p.buffers)];
    for _ in 1..copies {
        let mut bufs = specs
            .iter()
            .map(|s| alloc_guarded(backend, s.bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        load(backend, p.task, &p.data, &mut bufs, &[Role::Input])?;
        bufs.extend(alloc_scratch(backend, &p.plan)?);
        sets.push(bufs);
    }
    Ok(sets)
}

/// The baseline, when this evaluation measures it ([`measures_baseline`]); counts the
/// evaluation either way. Between re-measurements the window's median stands in
/// ([`TimingConfig::baseline_every`]).
fn baseline_to_measure<'b, K>(
    mut baseline: Option<&'b mut Baseline<K>>,
    t: &TimingConfig,
) -> Option<&'b mut Baseline<K>> {
    let measure = baseline.as_deref_mut().is_some_and(|b| {
        let median = crate::early_stop::median(b.samples.make_contiguous());
        let m = measures_baseline(
            b.evaluations,
            b.samples.len(),
            t.baseline_trials,
            baseline_every(t, median),
        );
        b.evaluations += 1;
        m
    });
    if measure {
        baseline
    } else {
        None
    }
}

/// How many baseline launches one timing makes.
struct BaselineSchedule {
    /// The baseline has no sample yet: it needs a warm-up launch before its first timed one.
    cold: bool,
    /// Launches at most.
    most: u32,
    /// Launches at least, whatever they cost.
    least: u32,
    /// Seconds past which a cold baseline's launches beyond `least` stop.
    budget_s: f64,
}

impl BaselineSchedule {
    /// The launches of `baseline` (`None`: not measured in this evaluation); a cold
    /// baseline's launches beyond the least stop at [`TimingConfig::first_baseline_seconds`].
    fn new<K>(t: &TimingConfig, baseline: Option<&Baseline<K>>) -> Self {
        let cold = baseline.is_some_and(|b| b.samples.is_empty());
        let (most, least) = match (baseline.is_some(), cold) {
            (false, _) => (0, 0),
            (true, false) => (t.baseline_trials, t.baseline_trials),
            (true, true) => {
                let most = first_baseline_trials(t);
                (
                    most,
                    most.min(t.baseline_trials.max(FIRST_BASELINE_MIN_TRIALS)),
                )
            }
        };
        BaselineSchedule {
            cold,
            most,
            least,
            budget_s: t.first_baseline_seconds,
        }
    }

    /// Whether the baseline is launched again after `done` launches that took `seconds`.
    fn more(&self, done: u32, seconds: f64) -> bool {
        more_baseline(done, seconds, self.least, self.most, self.budget_s)
    }
}

/// The candidate's side of a timing: its kernels and the verified input set.
struct CandidateRun<'a, 't, B: Backend> {
    backend: &'a B,
    kernels: &'a [B::Kernel],
    p: &'a Prepared<'t, B::Buffer>,
    specs: &'a [BufferSpec],
    flush_caches: bool,
}

impl<B: Backend> CandidateRun<'_, '_, B> {
    /// One timed launch on a rotation copy, outputs poisoned first. A sequence is timed as
    /// one launch: the sum of its kernels' device times.
    fn launch(&self, bufs: &mut [Guarded<B::Buffer>]) -> Result<f64, Failure> {
        let (backend, p) = (self.backend, self.p);
        load(backend, p.task, &p.data, bufs, &[Role::Output, Role::InOut])?;
        poison_scratch(backend, &p.plan, &mut bufs[self.specs.len()..])?;
        if self.flush_caches {
            let _ = backend.flush_caches();
        }
        let args = kernel_args::<B>(p.task, &p.sizes, bufs);
        let mut seconds = 0.0;
        for stage in &p.plan.stages {
            let Some(kernel) = self.kernels.get(stage.kernel) else {
                return Err(Failure::new(
                    Status::RuntimeError,
                    "a kernel of the plan was not compiled",
                ));
            };
            seconds += backend
                .launch(kernel, &args, &stage.range)
                .map(|l| l.device_seconds)
                .map_err(|e| backend_failure(&e, "launch failed"))?;
        }
        Ok(seconds)
    }
}

/// The baseline's side of a timing: its compiled kernels and window of samples, and output
/// buffers (and a sequence's scratch) of its own.
struct BaselineRun<'b, B: Backend> {
    baseline: &'b mut Baseline<B::Kernel>,
    out: Vec<Guarded<B::Buffer>>,
    /// Samples the window keeps ([`TimingConfig::baseline_window`]).
    window: usize,
}

impl<'b, B: Backend> BaselineRun<'b, B> {
    fn new(
        backend: &B,
        baseline: &'b mut Baseline<B::Kernel>,
        specs: &[BufferSpec],
        window: usize,
    ) -> Result<Self, Failure> {
        let mut out = specs
            .iter()
            .map(|s| alloc_guarded(backend, s.bytes()))
            .collect::<Result<Vec<_>, _>>()?;
        out.extend(alloc_scratch(backend, &baseline.plan)?);
        Ok(BaselineRun {
            baseline,
            out,
            window,
        })
    }

    /// One baseline launch with the inputs of rotation copy `inputs` and outputs of its own;
    /// its device seconds join the window when `record`.
    fn launch(
        &mut self,
        backend: &B,
        p: &Prepared<'_, B::Buffer>,
        specs: &[BufferSpec],
        inputs: &[Guarded<B::Buffer>],
        record: bool,
    ) -> Result<(), Failure> {
        let out = &mut self.out;
        for (i, (spec, d)) in specs.iter().zip(p.data.iter()).enumerate() {
            if spec.role != Role::Input {
                fill(backend, &mut out[i], &payload(spec, d))?;
            }
        }
        let view: Vec<&Guarded<B::Buffer>> = specs
            .iter()
            .enumerate()
            .map(|(i, s)| {
                if s.role == Role::Input {
                    &inputs[i]
                } else {
                    &out[i]
                }
            })
            .collect();
        let args: Vec<KernelArg<'_, B::Buffer>> = p
            .task
            .args()
            .iter()
            .filter_map(|a| match a {
                ArgSpec::Buffer(i) => view.get(*i).map(|g| buffer_arg(g)),
                other => value_arg(other, &p.sizes),
            })
            .chain(out[specs.len()..].iter().map(buffer_arg))
            .collect();
        let b = &mut *self.baseline;
        let mut s = 0.0;
        for stage in &b.plan.stages {
            let kernel = b.kernels.get(stage.kernel).ok_or_else(|| {
                Failure::new(Status::RuntimeError, "a baseline kernel was not compiled")
            })?;
            s += backend
                .launch(kernel, &args, &stage.range)
                .map_err(|e| {
                    Failure::new(Status::RuntimeError, format!("baseline launch failed: {e}"))
                })?
                .device_seconds;
        }
        if !record {
            return Ok(());
        }
        b.samples.push_back(s);
        while b.samples.len() > self.window.max(1) {
            b.samples.pop_front();
        }
        Ok(())
    }
}

/// What the timed trials left.
struct Trials {
    /// The candidate's device seconds, one per trial.
    samples: Vec<f64>,
    /// Their sum.
    total: f64,
    /// The early-stop rule's p-value, when it stopped the timing.
    stopped_early: Option<f64>,
    /// Wall-clock seconds of the baseline's launches.
    baseline_seconds: f64,
    /// The baseline's launches, its warm-up included (`None`: not measured).
    baseline_launches: Option<u32>,
}

/// One timing in progress: the candidate's trials over the rotation copies, with the
/// baseline's launches spread among them.
struct TimedRun<'a, 't, 'b, B: Backend> {
    candidate: CandidateRun<'a, 't, B>,
    baseline: Option<BaselineRun<'b, B>>,
    schedule: BaselineSchedule,
    copies: usize,
    sets: Vec<Vec<Guarded<B::Buffer>>>,
    /// Timed baseline launches so far.
    baseline_done: u32,
    /// Wall-clock seconds of the baseline's launches so far.
    baseline_seconds: f64,
}

impl<B: Backend> TimedRun<'_, '_, '_, B> {
    /// One baseline launch on rotation copy `copy` (nothing without a baseline), its wall
    /// clock charged to the baseline.
    fn launch_baseline(&mut self, copy: usize, record: bool) -> Result<(), Failure> {
        let started = Instant::now();
        if let Some(b) = self.baseline.as_mut() {
            let c = &self.candidate;
            b.launch(c.backend, c.p, c.specs, &self.sets[copy], record)?;
        }
        self.baseline_seconds += since(started);
        Ok(())
    }

    /// Warm-up, then trials until the configured minimums hold (or a limit or the early-stop
    /// rule ends them), then the baseline launches the schedule still asks for.
    fn trials(&mut self, t: &TimingConfig) -> Result<Trials, Failure> {
        let copies = self.copies;
        for w in 0..t.warmup {
            self.candidate.launch(&mut self.sets[w as usize % copies])?;
        }
        if self.schedule.cold {
            self.launch_baseline(0, false)?;
        }
        let started = Instant::now();
        let mut samples = Vec::new();
        let mut total = 0.0;
        let mut trial = 0usize;
        // Spread the baseline launches evenly over the first `min_trials` trials.
        let every = (t.min_trials.max(1) / self.schedule.most.max(1)).max(1) as usize;
        let stopped_early = loop {
            let copy = trial % copies;
            let s = self.candidate.launch(&mut self.sets[copy])?;
            samples.push(s);
            total += s;
            trial += 1;
            if self.more_baseline() && trial.is_multiple_of(every) {
                self.launch_baseline((copy + 1) % copies, true)?;
                self.baseline_done += 1;
            }
            if let Some(p) = t.early_stop.as_ref().and_then(|rule| rule.decide(&samples)) {
                break Some(p);
            }
            let enough = trial as u32 >= t.min_trials && total >= t.min_seconds;
            let too_long = trial as u32 >= t.max_trials
                || (trial as u32 >= t.min_trials.min(3)
                    && started.elapsed().as_secs_f64() >= t.max_seconds);
            if enough || too_long {
                break None;
            }
        };
        while self.more_baseline() {
            self.launch_baseline(trial % copies, true)?;
            self.baseline_done += 1;
        }
        Ok(Trials {
            samples,
            total,
            stopped_early,
            baseline_seconds: self.baseline_seconds,
            baseline_launches: self
                .baseline
                .is_some()
                .then(|| self.baseline_done + u32::from(self.schedule.cold)),
        })
    }

    /// Whether the schedule asks for another baseline launch.
    fn more_baseline(&self) -> bool {
        self.schedule
            .more(self.baseline_done, self.baseline_seconds)
    }
}

/// Every copy's last output must still be right: a kernel that skips work on repeated
/// launches, or keeps state between them, is caught here.
fn check_timed_copies<B: Backend>(
    backend: &B,
    p: &Prepared<'_, B::Buffer>,
    specs: &[BufferSpec],
    sets: &[Vec<Guarded<B::Buffer>>],
    trials: usize,
) -> Result<(), Failure> {
    let tolerance = p.task.describe().tolerance;
    for (c, bufs) in sets.iter().enumerate().take(trials.min(sets.len())) {
        check_after_launch(backend, p, bufs, &tolerance)
            .and_then(|_| check_scratch_after(backend, specs, &p.plan, &bufs[specs.len()..]))
            .map_err(|mut f| {
                f.message = format!(
                    "the output of timed launch on copy {c} is wrong: {}",
                    f.message
                );
                f
            })?;
    }
    Ok(())
}
