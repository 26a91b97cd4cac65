//! Confinement through the real `kf` (issue 61), as a user meets it:
//!
//! * a task's Python reference (under `kf task check`, and inside an evaluation worker under
//!   `kf eval`) and an imported KernelBench problem's reference (`kf task import-kernelbench`) that
//!   try a UDP datagram, a pathname UNIX socket (standing in for PostgreSQL's), writes into
//!   the compile caches and `devices.json`, a fork bomb, a 10 GiB file and a signal to their
//!   parent: every attempt gets an error, nothing reaches the listeners or the files, and the
//!   command succeeds (the reference then computes honestly), so the next evaluation is
//!   `correct`;
//! * with Landlock made unavailable from outside the process (a seccomp filter returning
//!   `ENOSYS` for the `landlock_*` calls, installed before `kf` is executed), each command
//!   (`kf task check`, `kf eval`, `kf task import-kernelbench`, `kf worker`, `kf search`)
//!   refuses to run untrusted code and names what is missing; with `--allow-unconfined` it
//!   runs and records `unconfined` (`kf eval --json`, a search's report.json).
//!
//! Real OpenCL and the real Python of `scripts/setup.sh`; skips without them unless
//! `KF_REQUIRE_OPENCL=1` / `KF_REQUIRE_PYTHON=1`, and without Landlock unless
//! `KF_REQUIRE_LANDLOCK=1`.

use std::net::UdpSocket;
use std::os::unix::net::UnixListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use kernelfoundry::eval::confine::{probe, ConfinementLevel};
use kernelfoundry::eval::task::file::python::numpy_or_skip;
use kernelfoundry::opencl::testing::backend_or_skip;

mod common;
use common::text;

/// The attempts, as Python run before anything else: each one that succeeds is named in the
/// `RuntimeError` raised at the end.
const PROBES: &str = r#"
import os as _os, socket as _socket, time as _time

def _kf_escape_probes():
    escaped = []
    try:
        s = _socket.socket(_socket.AF_INET, _socket.SOCK_DGRAM)
        s.sendto(b"leak", ("127.0.0.1", int(_os.environ["KF_PROBE_UDP_PORT"])))
        escaped.append("a UDP datagram")
    except (OSError, KeyError, ValueError):
        pass
    for path in _os.environ.get("KF_PROBE_UNIX", "").split(_os.pathsep):
        try:
            s = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            s.connect(path)
            s.sendall(b"leak")
            escaped.append("a UNIX socket (" + path + ")")
        except OSError:
            pass
    for target in _os.environ.get("KF_PROBE_WRITES", "").split(_os.pathsep):
        if not target:
            continue
        try:
            with open(target, "a") as f:
                f.write("tampered")
            escaped.append("a write to " + target)
        except OSError:
            pass
    children, refused = [], False
    for _ in range(int(_os.environ.get("KF_PROBE_FORKS", "3000"))):
        try:
            pid = _os.fork()
        except OSError:
            refused = True
            break
        if pid == 0:
            _time.sleep(1)
            _os._exit(0)
        children.append(pid)
    for pid in children:
        _os.waitpid(pid, 0)
    if not refused:
        escaped.append("a fork bomb (%d processes)" % len(children))
    try:
        with open(_os.path.join(_os.environ.get("TMPDIR", "."), "big"), "wb") as f:
            f.seek(10 << 30)
            f.write(b"x")
        escaped.append("a 10 GiB file")
    except OSError:
        pass
    try:
        _os.kill(_os.getppid(), 0)
        escaped.append("a signal to its parent")
    except OSError:
        pass
    if escaped:
        raise RuntimeError("escaped: " + ", ".join(escaped))
    if _os.environ.get("KF_PROBE_PROVE"):
        raise RuntimeError("the probes ran and were all refused")

_kf_escape_probes()
"#;

/// Landlock's three system calls fail with `ENOSYS` in the process `command` starts, as on a
/// kernel without Landlock.
fn without_landlock(command: &mut Command) {
    use seccompiler::{BpfProgram, SeccompAction, SeccompFilter};
    let rules = [
        libc::SYS_landlock_create_ruleset,
        libc::SYS_landlock_add_rule,
        libc::SYS_landlock_restrict_self,
    ]
    .into_iter()
    .map(|call| (call, Vec::new()))
    .collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        std::env::consts::ARCH.try_into().unwrap(),
    )
    .unwrap();
    let program: BpfProgram = filter.try_into().unwrap();
    // SAFETY: the closure only installs the prepared filter (prctl and seccomp; no
    // allocation) between fork and exec.
    unsafe {
        command.pre_exec(move || {
            seccompiler::apply_filter(&program).map_err(|e| std::io::Error::other(e.to_string()))
        });
    }
}

/// Runs `kf args`, with Landlock removed when `no_landlock`; fails on a panic.
fn kf(args: &[&str], env: &[(&str, String)], no_landlock: bool) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_kf"));
    command.args(args).envs(env.iter().map(|(k, v)| (k, v)));
    if no_landlock {
        without_landlock(&mut command);
    }
    let out = command.output().expect("running kf");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "kf {args:?} panicked:\n{}",
        text(&out)
    );
    out
}

/// The listeners and files the probes aim at, and what they held before.
struct Targets {
    udp: UdpSocket,
    unix: UnixListener,
    _dir: tempfile::TempDir,
    unix_path: PathBuf,
    files: Vec<(PathBuf, Option<Vec<u8>>)>,
}

impl Targets {
    fn new() -> Self {
        let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
        udp.set_nonblocking(true).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let unix_path = dir.path().join("db.sock");
        let unix = UnixListener::bind(&unix_path).unwrap();
        unix.set_nonblocking(true).unwrap();
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let home_cache = std::env::var_os("HOME")
            .map(|h| PathBuf::from(h).join(".cache/kernelfoundry/probe-entry.bin"));
        let mut files: Vec<PathBuf> = vec![root.join(".runtime/cache/probe-entry.bin")];
        files.extend(home_cache);
        files.extend(kernelfoundry::eval::characterise::cache_path());
        let files = files
            .into_iter()
            .map(|p| {
                let before = std::fs::read(&p).ok();
                (p, before)
            })
            .collect();
        Targets {
            udp,
            unix,
            _dir: dir,
            unix_path,
            files,
        }
    }

    fn env(&self) -> Vec<(&'static str, String)> {
        let writes = std::env::join_paths(self.files.iter().map(|(p, _)| p))
            .unwrap()
            .to_string_lossy()
            .into_owned();
        vec![
            (
                "KF_PROBE_UDP_PORT",
                self.udp.local_addr().unwrap().port().to_string(),
            ),
            ("KF_PROBE_UNIX", {
                let mut paths = vec![self.unix_path.clone()];
                paths.extend(postgres_socket());
                std::env::join_paths(paths)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned()
            }),
            ("KF_PROBE_WRITES", writes),
        ]
    }

    /// Nothing arrived and no file changed.
    fn assert_untouched(&self, what: &str) {
        let mut buf = [0u8; 64];
        assert!(
            self.udp.recv_from(&mut buf).is_err(),
            "{what}: a datagram reached the listener"
        );
        assert!(
            self.unix.accept().is_err(),
            "{what}: a connection reached the UNIX socket"
        );
        for (path, before) in &self.files {
            let after = std::fs::read(path).ok();
            match before {
                Some(_) => assert_eq!(&after, before, "{what}: {} changed", path.display()),
                // `kf` itself may create a file that did not exist yet (the first evaluation
                // on a fresh clone characterises the device into `devices.json`); the probe
                // only appends its marker, so a file it reached holds that marker.
                None => assert!(
                    !after.is_some_and(|bytes| bytes.windows(8).any(|w| w == b"tampered")),
                    "{what}: the probe wrote into {}",
                    path.display()
                ),
            }
        }
    }
}

/// Runs `kf args` with the probes' targets, first with `KF_PROBE_PROVE` set (the probes end by
/// failing on purpose, so the run shows they ran, all refused), then as is; returns the
/// second run.
fn probed(args: &[&str], targets: &Targets) -> Output {
    probed_with(args, targets, &[])
}

/// [`probed`] with extra variables for `kf`.
fn probed_with(args: &[&str], targets: &Targets, extra: &[(&'static str, String)]) -> Output {
    let mut env = targets.env();
    env.extend(extra.iter().cloned());
    env.push(("KF_PROBE_PROVE", "1".into()));
    let proof = kf(args, &env, false);
    let said = text(&proof);
    assert!(
        said.contains("the probes ran and were all refused"),
        "kf {args:?} did not run the probes, or one escaped:\n{said}"
    );
    env.retain(|(k, _)| *k != "KF_PROBE_PROVE");
    kf(args, &env, false)
}

/// The development PostgreSQL's socket (`scripts/dist-servers.sh start`), when it runs: the
/// superuser's way in, which no confined process may reach.
fn postgres_socket() -> Option<PathBuf> {
    let info = Path::new(env!("CARGO_MANIFEST_DIR")).join(".runtime/dist-servers.json");
    let info: serde_json::Value = serde_json::from_slice(&std::fs::read(info).ok()?).ok()?;
    // postgresql://postgres@%2Fsome%2Fdir:PORT/postgres
    let url = info["admin_url"].as_str()?;
    let authority = url.split('@').nth(1)?.split('/').next()?;
    let (dir, port) = authority.rsplit_once(':')?;
    let socket = PathBuf::from(dir.replace("%2F", "/")).join(format!(".s.PGSQL.{port}"));
    socket.exists().then_some(socket)
}

/// Whether this machine confines completely; a skip (kind LANDLOCK) otherwise.
fn complete_or_skip() -> bool {
    let c = probe();
    if c.is_complete() {
        return true;
    }
    kernelfoundry::core::testing::skip::skip(
        kernelfoundry::core::testing::skip::SkipKind::Landlock,
        format_args!("untrusted processes here get {c}"),
    );
    false
}

/// A copy of the shipped example whose reference runs [`PROBES`] first.
fn probing_task() -> tempfile::TempDir {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/examples/scaled_swish");
    let tmp = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&shipped).unwrap().flatten() {
        std::fs::copy(entry.path(), tmp.path().join(entry.file_name())).unwrap();
    }
    let reference = tmp.path().join("scaled_swish_ref.py");
    let honest = std::fs::read_to_string(&reference).unwrap();
    std::fs::write(&reference, format!("{PROBES}\n{honest}")).unwrap();
    tmp
}

/// The control: run unconfined (plain Python, beside the listeners), the same probes escape
/// by every route, so the tests above are about the confinement and not about probes that
/// cannot work. The fork bomb is cut to 5 processes and the writes aimed at a scratch file.
#[test]
fn the_probes_escape_when_nothing_confines_them() {
    if !numpy_or_skip() {
        return;
    }
    let targets = Targets::new();
    let scratch = tempfile::tempdir().unwrap();
    let victim = scratch.path().join("victim.json");
    let mut env = targets.env();
    env.retain(|(k, _)| !matches!(*k, "KF_PROBE_WRITES" | "KF_PROBE_UNIX"));
    env.push(("KF_PROBE_WRITES", path(&victim)));
    env.push(("KF_PROBE_UNIX", path(&targets.unix_path)));
    env.push(("KF_PROBE_FORKS", "5".into()));
    env.push(("TMPDIR", path(scratch.path())));
    let out = Command::new(kernelfoundry::eval::task::file::python::python_interpreter())
        .arg("-c")
        .arg(PROBES)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .output()
        .unwrap();
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    for route in [
        "a UDP datagram",
        "a UNIX socket",
        "a write to",
        "a fork bomb (5 processes)",
        "a 10 GiB file",
        "a signal to its parent",
    ] {
        assert!(
            said.contains(route),
            "the unconfined probe did not escape by {route}: {said}"
        );
    }
    let mut buf = [0u8; 8];
    assert!(
        targets.udp.recv_from(&mut buf).is_ok(),
        "the datagram arrived"
    );
    assert!(targets.unix.accept().is_ok(), "the connection arrived");
    assert!(victim.exists());
}

fn path(p: &Path) -> String {
    p.display().to_string()
}

#[test]
fn a_reference_that_tries_to_escape_gets_errors_under_task_check_and_eval() {
    if !(backend_or_skip().is_some() && numpy_or_skip() && complete_or_skip()) {
        return;
    }
    let task = probing_task();
    let file = task.path().join("scaled_swish.toml");
    let targets = Targets::new();
    let out = probed(
        &["task", "check", &path(&file), "--size", "ROWS=64,COLS=48"],
        &targets,
    );
    assert!(out.status.success(), "{}", text(&out));
    targets.assert_untouched("kf task check");
    // As on a kernel with Landlock ABI 3 (no TCP rules, no scopes): the seccomp layer stands
    // in for them, signals included.
    let out = probed_with(
        &["task", "check", &path(&file), "--size", "ROWS=64,COLS=48"],
        &targets,
        &[(
            kernelfoundry::eval::confine::LANDLOCK_ABI_MAX_ENV,
            "3".into(),
        )],
    );
    assert!(out.status.success(), "{}", text(&out));
    targets.assert_untouched("kf task check at Landlock ABI 3");

    // Inside an evaluation worker: the reference runs there, under the worker's layers and
    // its own; the kernel is then judged correct.
    let out = probed(
        &[
            "eval",
            "--task-file",
            &path(&file),
            "--size",
            "ROWS=64,COLS=48",
            "--kernel",
            &path(&task.path().join("scaled_swish_fast.toml")),
            "--json",
        ],
        &targets,
    );
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], "correct", "{}", text(&out));
    assert_eq!(json["confinement"]["level"], "complete", "{json}");
    targets.assert_untouched("kf eval");
}

#[test]
fn an_imported_problem_file_that_tries_to_escape_gets_errors() {
    if !(numpy_or_skip() && complete_or_skip()) {
        return;
    }
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernelbench_unseen");
    let dir = tempfile::tempdir().unwrap();
    let problem = dir.path().join("24_LogSoftmax.py");
    // Without PyTorch the importer reads the problem file's syntax and runs its NumPy
    // reference, the third-party code here (with PyTorch it runs the problem file itself,
    // through the same confined helper).
    std::fs::copy(data.join("vendor/24_LogSoftmax.py"), &problem).unwrap();
    let reference = std::fs::read_to_string(data.join("24_LogSoftmax_ref.py")).unwrap();
    std::fs::write(
        dir.path().join("24_LogSoftmax_ref.py"),
        format!("{PROBES}\n{reference}"),
    )
    .unwrap();
    let targets = Targets::new();
    let out_dir = dir.path().join("task");
    let out = probed(
        &[
            "task",
            "import-kernelbench",
            &path(&problem),
            "--out",
            &path(&out_dir),
            "--size",
            "batch_size=8,dim=64",
            "--numpy",
        ],
        &targets,
    );
    assert!(out.status.success(), "{}", text(&out));
    targets.assert_untouched("kf task import-kernelbench");
}

#[test]
fn without_landlock_each_command_refuses_unless_allowed() {
    if !(backend_or_skip().is_some() && numpy_or_skip() && complete_or_skip()) {
        return;
    }
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/examples/scaled_swish");
    let file = path(&shipped.join("scaled_swish.toml"));
    let kernel = path(&shipped.join("scaled_swish_fast.toml"));
    let data = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/kernelbench_unseen");
    let dir = tempfile::tempdir().unwrap();
    let import_out = path(&dir.path().join("task"));
    let problem = path(&data.join("vendor/24_LogSoftmax.py"));
    let search_out = dir.path().join("run");
    let commands: Vec<Vec<String>> = vec![
        vec!["task", "check", &file, "--size", "ROWS=64,COLS=48"],
        vec![
            "eval",
            "--task-file",
            &file,
            "--size",
            "ROWS=64,COLS=48",
            "--kernel",
            &kernel,
            "--json",
        ],
        vec![
            "task",
            "import-kernelbench",
            &problem,
            "--out",
            &import_out,
            "--size",
            "batch_size=8,dim=64",
        ],
    ]
    .into_iter()
    .map(|c| c.into_iter().map(String::from).collect())
    .collect();
    for command in &commands {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        let out = kf(&args, &[], true);
        let said = text(&out);
        assert!(!out.status.success(), "kf {args:?} ran unconfined:\n{said}");
        assert!(
            said.contains("without complete confinement")
                && said.contains("file rules")
                && said.contains("--allow-unconfined"),
            "kf {args:?} must name what is missing and the way out:\n{said}"
        );
    }
    assert!(
        !dir.path().join("task").exists(),
        "a refused import wrote nothing"
    );
    // A distributed worker refuses at its start, before it connects or takes a job.
    let out = kf(
        &[
            "worker",
            "--nats",
            "nats://127.0.0.1:9",
            "--db",
            "postgres://127.0.0.1:9/kf",
            "--insecure",
        ],
        &[],
        true,
    );
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("refusing to run a distributed evaluation worker's jobs")
            && said.contains("file rules"),
        "{said}"
    );
    // With the explicit way out: a warning, the run, and the record.
    for command in &commands {
        let mut args: Vec<&str> = command.iter().map(String::as_str).collect();
        args.push("--allow-unconfined");
        let out = kf(&args, &[], true);
        let said = text(&out);
        assert!(out.status.success(), "kf {args:?}:\n{said}");
        assert!(said.contains("warning: --allow-unconfined"), "{said}");
        if args[0] == "eval" {
            let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(json["status"], "correct", "{json}");
            assert_eq!(
                json["confinement"]["level"],
                serde_json::json!(ConfinementLevel::Unconfined),
                "{json}"
            );
        }
    }
    // A search's report.json records it too.
    let out = kf(
        &[
            "search",
            "--task-file",
            &file,
            "--kernel",
            &kernel,
            "--size",
            "ROWS=64,COLS=48",
            "--evaluations",
            "2",
            "--out",
            &path(&search_out),
            "--allow-unconfined",
        ],
        &[],
        true,
    );
    assert!(out.status.success(), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(search_out.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        report["confinement"]["level"], "unconfined",
        "{}",
        report["confinement"]
    );
}
