//! The [`Table`] of a task a generated crate embeds (checks of the call, the choice of a
//! configuration, the launch) and the [`KernelCache`] of compiled kernels.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use opencl3::kernel::Kernel;

use super::configuration::{Arg, Configuration};
use super::device::Device;
use super::dispatch::{choose, Caller, Candidate};
use super::error::Error;
use super::signature::{sizes_text, ArgSig, BufferSig, HostData, ScalarArg, Signature};
use super::symbols::{DeviceFacts, Site, Symbols};

/// A task's signature and its tuned configurations.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// The task's kernel signature.
    pub signature: &'static Signature,
    /// The tuned configurations.
    pub configurations: &'static [Configuration],
}

impl Table {
    fn bad_call(&self, message: String) -> Error {
        Error::BadCall {
            task: self.signature.task.to_string(),
            message,
        }
    }

    /// Configuration `index`.
    ///
    /// # Errors
    ///
    /// [`Error::NoSuchConfiguration`].
    pub fn configuration(&self, index: usize) -> Result<&'static Configuration, Error> {
        self.configurations
            .get(index)
            .ok_or_else(|| Error::NoSuchConfiguration {
                task: self.signature.task.to_string(),
                index,
                len: self.configurations.len(),
            })
    }

    /// The caller's sizes by name, in the signature's order; each must be positive and fit
    /// an OpenCL `int`.
    fn sizes(&self, values: &[i64]) -> Result<Vec<(&'static str, i64)>, Error> {
        let sig: &'static Signature = self.signature;
        if values.len() != sig.sizes.len() {
            return Err(self.bad_call(format!(
                "{} sizes given, the task has {} ({})",
                values.len(),
                sig.sizes.len(),
                sig.size_names().join(", ")
            )));
        }
        let mut out = Vec::with_capacity(values.len());
        for (name, v) in sig.sizes.iter().zip(values) {
            if *v <= 0 || *v > i64::from(i32::MAX) {
                return Err(self.bad_call(format!("{name} = {v} is not a positive OpenCL int")));
            }
            out.push((name.as_ref(), *v));
        }
        Ok(out)
    }

    /// Whether configuration `index` can run at `sizes` (in the signature's order) on
    /// `device`: its constraints hold and its launch geometry is valid.
    ///
    /// # Errors
    ///
    /// As [`Configuration::geometry`]'s, [`Error::BadCall`] for sizes that do not fit the
    /// signature, [`Error::NoSuchConfiguration`].
    pub fn check(&self, index: usize, device: &DeviceFacts, sizes: &[i64]) -> Result<(), Error> {
        let named = self.sizes(sizes)?;
        self.configuration(index)?
            .geometry(device, &named)
            .map(|_| ())
    }

    /// The configuration that serves a call at `sizes` (in the signature's order) on `device`:
    /// among those whose constraints hold, the one [`choose`] picks.
    ///
    /// # Errors
    ///
    /// [`Error::NoConfiguration`], naming each configuration's failing rule, when none can
    /// run; [`Error::BadCall`] for sizes that do not fit the signature.
    pub fn choose(&self, device: &DeviceFacts, sizes: &[i64]) -> Result<usize, Error> {
        let named = self.sizes(sizes)?;
        let mut reasons = Vec::new();
        let candidates: Vec<Candidate<'_>> = self
            .configurations
            .iter()
            .map(|c| {
                let valid = match c.geometry(device, &named) {
                    Ok(_) => true,
                    Err(e) => {
                        reasons.push(e.to_string());
                        false
                    }
                };
                Candidate {
                    device: c.device,
                    driver: c.driver,
                    sizes: c.tuned_sizes,
                    valid,
                }
            })
            .collect();
        let caller = Caller {
            device: &device.name,
            driver: &device.driver_version,
            sizes: &named,
        };
        choose(&candidates, &caller).ok_or_else(|| Error::NoConfiguration {
            task: self.signature.task.to_string(),
            sizes: sizes_text(named.iter().copied()),
            device: device.name.clone(),
            reasons: reasons.join("; "),
        })
    }

    /// Checks a call's scalars and buffers against the signature at `sizes`.
    fn check_args(
        &self,
        sizes: &[(&str, i64)],
        scalars: &[ScalarArg],
        data: &[HostData<'_>],
    ) -> Result<(), Error> {
        let sig = self.signature;
        if scalars.len() != sig.scalars.len() {
            return Err(self.bad_call(format!(
                "{} scalars given, the task has {}",
                scalars.len(),
                sig.scalars.len()
            )));
        }
        if let Some((s, v)) = sig
            .scalars
            .iter()
            .zip(scalars)
            .find(|(s, v)| v.dtype() != s.dtype)
        {
            return Err(self.bad_call(format!(
                "scalar {} is {}, not {}",
                s.name,
                s.dtype.rust(),
                v.dtype().rust()
            )));
        }
        if data.len() != sig.buffers.len() {
            return Err(self.bad_call(format!(
                "{} buffers given, the task has {}",
                data.len(),
                sig.buffers.len()
            )));
        }
        let symbols = Symbols::new(None, sizes, &[]);
        let context = format!("signature of {}", sig.task);
        for (i, (b, d)) in sig.buffers.iter().zip(data).enumerate() {
            let site = Site {
                configuration: &context,
                field: format!("buffers[{i}]"),
                expr: &b.len,
            };
            let len = site.eval_i64(&symbols)?;
            self.check_buffer(b, d, len, sizes)?;
        }
        Ok(())
    }

    fn check_buffer(
        &self,
        b: &BufferSig,
        d: &HostData<'_>,
        len: i64,
        sizes: &[(&str, i64)],
    ) -> Result<(), Error> {
        let is_out = matches!(d, HostData::Out(_));
        if is_out != b.access.writes() {
            let role = if b.access.writes() {
                "written by the kernel (pass it as an output)"
            } else {
                "an input"
            };
            return Err(self.bad_call(format!("buffer {} is {role}", b.name)));
        }
        let want = usize::try_from(len)
            .unwrap_or(0)
            .saturating_mul(b.dtype.size());
        let got = d.bytes().len();
        if got != want {
            return Err(self.bad_call(format!(
                "buffer {} has {} elements, {} = {len} at {}",
                b.name,
                got / b.dtype.size(),
                b.len,
                sizes_text(sizes.iter().copied())
            )));
        }
        Ok(())
    }

    /// Runs configuration `index` at `sizes` (in the signature's order) on `device`, with the
    /// values of the task's scalars (in [`Signature::scalars`] order) and one [`HostData`] per
    /// buffer of the signature (outputs are read back into theirs). The compiled kernel is
    /// kept in `cache` (or taken from it); use one cache per device.
    ///
    /// # Errors
    ///
    /// [`Error::BadCall`] for arguments that do not fit the signature, the errors of
    /// [`Table::check`], [`Error::Compile`], and [`Error::OpenCl`] when launching fails.
    pub fn launch(
        &self,
        device: &Device,
        cache: &KernelCache,
        index: usize,
        sizes: &[i64],
        scalars: &[ScalarArg],
        data: &mut [HostData<'_>],
    ) -> Result<(), Error> {
        let named = self.sizes(sizes)?;
        self.check_args(&named, scalars, data)?;
        let c = self.configuration(index)?;
        let geometry = c.geometry(device.facts(), &named)?;
        let mut kernels = cache.lock();
        if !kernels.contains_key(c.name) {
            kernels.insert(c.name, device.build(c)?);
        }
        let Some(kernel) = kernels.get(c.name) else {
            return Err(self.bad_call(format!("{}: the kernel cache lost it", c.name)));
        };
        let mut buffers = Vec::with_capacity(data.len());
        for d in data.iter() {
            buffers.push(device.upload(d.bytes())?);
        }
        let mut ints = Vec::with_capacity(self.signature.args.len());
        for a in self.signature.args.iter() {
            ints.push(match a {
                ArgSig::Size(name) => Arg::I32(
                    named
                        .iter()
                        .find(|(n, _)| *n == name.as_ref())
                        .and_then(|(_, v)| i32::try_from(*v).ok())
                        .unwrap_or(0),
                ),
                ArgSig::Scalar(i) => match scalars.get(*i) {
                    Some(ScalarArg::F32(v)) => Arg::F32(*v),
                    Some(ScalarArg::I32(v)) => Arg::I32(*v),
                    None => return Err(self.bad_call(format!("no scalar {i}"))),
                },
                ArgSig::Buffer(i) => Arg::Buffer(*i),
            });
        }
        device.run(kernel, &ints, &buffers, &geometry)?;
        for (d, buffer) in data.iter_mut().zip(&buffers) {
            if let HostData::Out(s) = d {
                device.download(buffer, s)?;
            }
        }
        Ok(())
    }
}

/// Compiled kernels by configuration name, for one [`Device`] (a kernel belongs to its
/// device's OpenCL context).
#[derive(Default)]
pub struct KernelCache {
    kernels: Mutex<HashMap<&'static str, Kernel>>,
}

impl fmt::Debug for KernelCache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("KernelCache")
            .field("kernels", &self.len())
            .finish()
    }
}

impl KernelCache {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// Kernels held.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether it holds no kernel.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The map, locked for one launch (setting a kernel's arguments is not thread-safe).
    fn lock(&self) -> MutexGuard<'_, HashMap<&'static str, Kernel>> {
        // A panic elsewhere while holding the lock leaves the map intact.
        self.kernels.lock().unwrap_or_else(|e| e.into_inner())
    }
}
