//! The run explorer in a real headless Chromium, driven over the DevTools protocol: the page of
//! a real gemm run (written by `kf search` itself) and of a synthetic 10,000-candidate run
//! directory, and `kf serve` updating live while records are appended to a locked run
//! directory, bound to loopback only, refusing path traversal.
//!
//! Chromium: Debian's `chromium` (`scripts/setup.sh --browser`), or the binary named by
//! `KF_CHROMIUM`. Tests that need it print `SKIPPED: …` when it is missing, unless
//! `KF_REQUIRE_BROWSER=1`; the gemm run likewise needs the OpenCL runtime unless
//! `KF_REQUIRE_OPENCL=1`. Screenshots go to `target/explorer/` for a person to look at.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::{Browser, LaunchOptions, Tab};
use kernelfoundry::archive::{EliteArchive, RunDir, RunMeta};
use kernelfoundry::core::testing::{
    synthetic_seed, SyntheticClassifier, SyntheticEvaluator, SyntheticMutator,
};
use kernelfoundry::core::{Archive, BehaviorClassifier, Budget, Engine, StepRecord};
use kernelfoundry::explorer::{RunData, RunFiles};
use kernelfoundry::opencl::testing::backend_or_skip;
use serde_json::Value;

// ---------------------------------------------------------------- the browser

#[track_caller]
fn chromium() -> Option<PathBuf> {
    let found = std::env::var_os("KF_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(
            ["chromium", "chromium-browser", "google-chrome"]
                .iter()
                .filter_map(|n| {
                    std::env::var_os("PATH").and_then(|p| {
                        std::env::split_paths(&p)
                            .map(|d| d.join(n))
                            .find(|f| f.is_file())
                    })
                }),
        )
        .find(|p| p.is_file());
    if found.is_none() {
        // Kind `BROWSER`: KF_REQUIRE_BROWSER=1 makes this a failure.
        kernelfoundry::core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Browser,
            "no Chromium (run scripts/setup.sh --browser, or set KF_CHROMIUM)",
        );
    }
    found
}

struct Page {
    _browser: Browser,
    tab: Arc<Tab>,
    errors: Arc<Mutex<Vec<String>>>,
}

fn open_browser(path: &Path) -> Page {
    open_browser_with(path, &[])
}

/// [`open_browser`] with extra Chromium switches.
fn open_browser_with(path: &Path, switches: &[&str]) -> Page {
    let options = LaunchOptions::default_builder()
        .path(Some(path.to_path_buf()))
        .args(switches.iter().map(std::ffi::OsStr::new).collect())
        .sandbox(false)
        .window_size(Some((1500, 1150)))
        .idle_browser_timeout(Duration::from_secs(300))
        .build()
        .unwrap();
    let browser = Browser::new(options).expect("Chromium starts");
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(30));
    let errors = Arc::new(Mutex::new(Vec::new()));
    tab.enable_runtime().unwrap();
    tab.enable_log().unwrap();
    let sink = errors.clone();
    tab.add_event_listener(Arc::new(move |event: &Event| {
        let what = match event {
            Event::RuntimeExceptionThrown(e) => Some(format!("exception: {:?}", e.params)),
            Event::RuntimeConsoleAPICalled(e) if format!("{:?}", e.params.Type) == "Error" => {
                Some(format!("console.error: {:?}", e.params.args))
            }
            Event::LogEntryAdded(e) if format!("{:?}", e.params.entry.level) == "Error" => {
                Some(format!("log: {}", e.params.entry.text))
            }
            _ => None,
        };
        if let Some(w) = what {
            sink.lock().unwrap().push(w);
        }
    }))
    .unwrap();
    Page {
        _browser: browser,
        tab,
        errors,
    }
}

impl Page {
    fn eval(&self, js: &str) -> Value {
        self.tab
            .evaluate(js, false)
            .unwrap_or_else(|e| panic!("evaluating {js}: {e}"))
            .value
            .unwrap_or(Value::Null)
    }

    /// Opens `url` and waits until the page's script has run. (`Tab::wait_until_navigated`
    /// can miss a fast local load and wait forever.)
    fn goto(&self, url: &str) {
        self.tab.navigate_to(url).unwrap();
        assert!(
            self.wait_for(
                "document.readyState === 'complete' && window.kfExplorer !== undefined",
                Duration::from_secs(60)
            ),
            "{url} did not load"
        );
    }

    fn wait_for(&self, js: &str, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        while Instant::now() < end {
            // An evaluation during a navigation fails; that is a "not yet".
            let now = self.tab.evaluate(js, false).ok().and_then(|o| o.value);
            if now == Some(Value::Bool(true)) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    fn screenshot(&self, name: &str) {
        let png = self
            .tab
            .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
            .unwrap();
        let dir = target_dir().join("explorer");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
        eprintln!("screenshot: {}", dir.join(name).display());
    }

    fn no_console_errors(&self) {
        let errors = self.errors.lock().unwrap();
        assert!(errors.is_empty(), "console errors: {errors:#?}");
    }
}

fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"))
}

fn file_url(path: &Path) -> String {
    format!("file://{}", path.canonicalize().unwrap().display())
}

/// The checks every page must pass: filled cells as in the data, a click on a cell shows that
/// elite's source, the best kernel's lineage reaches a seed, a diff renders, no console errors.
fn check_page(page: &Page, data: &RunData, shot: &str) {
    page.tab.wait_for_element("#heatmap svg").unwrap();
    // Filled cells of the first projection: the distinct (x, y) pairs of the elites' cells.
    let by_id: std::collections::HashMap<u64, _> =
        data.candidates.iter().map(|c| (c.id, c)).collect();
    let projected: HashSet<(usize, usize)> = data
        .elites
        .iter()
        .map(|id| {
            let c = by_id[id].coords.as_ref().unwrap();
            (c[0], c.get(1).copied().unwrap_or(0))
        })
        .collect();
    let filled =
        page.eval("document.querySelector('#heatmap svg').querySelectorAll('.cell.filled').length");
    assert_eq!(
        filled,
        Value::from(projected.len()),
        "filled cells of the first projection"
    );
    assert_eq!(
        page.eval("document.getElementById('s-cells').textContent.split(' / ')[0]"),
        Value::from(data.elites.len().to_string())
    );
    page.screenshot(&format!("{shot}-overview.png"));

    // Click the last filled cell: the detail shows that elite, and its source text. The cell
    // is marked and found alone: `find_elements` over every filled cell resolves each node
    // over the DevTools protocol (40 s for the 10,000-candidate run's heatmap).
    let id: u64 = page
        .eval(
            "(() => { const c = [...document.querySelectorAll('#heatmap svg .cell.filled')].pop(); \
             c.setAttribute('data-test-click', ''); return c.dataset.id; })()",
        )
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let cell = page
        .tab
        .find_element("#heatmap svg .cell.filled[data-test-click]")
        .unwrap();
    cell.click().unwrap();
    assert!(page.wait_for(
        &format!("document.getElementById('d-title').textContent.startsWith('#{id} ')"),
        Duration::from_secs(5)
    ));
    let source = data.sources[&by_id[&id].src].clone();
    let first_line = source
        .lines()
        .find(|l| l.trim().len() > 8)
        .unwrap()
        .trim()
        .to_owned();
    assert!(
        page.wait_for(
            &format!(
                "document.getElementById('code').textContent.includes({})",
                serde_json::to_string(&first_line).unwrap()
            ),
            Duration::from_secs(5)
        ),
        "the source of #{id} is shown"
    );
    assert_eq!(
        page.eval(
            "document.getElementById('code').querySelectorAll('span.kw, span.ty, span.cm, span.pp').length > 0"
        ),
        Value::Bool(true),
        "the source is highlighted"
    );

    // The best kernel's lineage reaches a seed.
    let best = data.best.or(data.elites.first().copied()).unwrap();
    page.eval(&format!("kfExplorer.select({best})"));
    assert_eq!(
        page.eval("document.getElementById('lineage').dataset.reachedSeed"),
        Value::from("1"),
        "the lineage of #{best} reaches a seed"
    );
    let mut root = best;
    while let Some(p) = by_id[&root].parents.first() {
        root = *p;
    }
    assert_eq!(by_id[&root].mutator, "seed");
    assert_eq!(
        page.eval("document.querySelector('#lineage .node').dataset.mutator"),
        Value::from("seed")
    );
    page.screenshot(&format!("{shot}-best.png"));

    // A diff between a child and its parent: one whose text differs when there is one.
    let child =
        data.candidates
            .iter()
            .rev()
            .find(|c| {
                c.parents.first().is_some_and(|p| {
                    by_id[p].src != c.src && data.sources.contains_key(&by_id[p].src)
                }) && data.sources.contains_key(&c.src)
            })
            .or_else(|| data.candidates.iter().rev().find(|c| !c.parents.is_empty()))
            .unwrap();
    page.eval(&format!("kfExplorer.select({})", child.id));
    page.tab.find_element("#v-diff").unwrap().click().unwrap();
    let differs = by_id[&child.parents[0]].src != child.src;
    let rendered = if differs {
        "document.querySelectorAll('#code .add, #code .del').length > 0"
    } else {
        "document.getElementById('code').textContent.includes('Same source text')"
    };
    assert!(
        page.wait_for(rendered, Duration::from_secs(5)),
        "the diff of #{} renders",
        child.id
    );
    page.screenshot(&format!("{shot}-diff.png"));
    page.eval("document.getElementById('v-source').click()");

    // The table sorts and filters.
    page.tab
        .find_element("th[data-k=fitness]")
        .unwrap()
        .click()
        .unwrap();
    let first_row = page.eval("Number(document.querySelector('#table tbody tr').dataset.id)");
    let top = data
        .candidates
        .iter()
        .filter(|c| c.fitness.is_some())
        .max_by(|a, b| a.fitness.partial_cmp(&b.fitness).unwrap())
        .unwrap();
    assert_eq!(
        by_id[&first_row.as_u64().unwrap()].fitness,
        top.fitness,
        "sorting by fitness puts the fittest first"
    );
    page.no_console_errors();
}

// ---------------------------------------------------------------- synthetic runs

fn synthetic_engine(
    evaluations: u64,
    dir: Option<RunDir>,
) -> (EliteArchive, kernelfoundry::core::DescriptorSpace) {
    let classifier = SyntheticClassifier::new(8);
    let space = classifier.space().clone();
    let mut engine = Engine::new(
        SyntheticMutator::new(0.08),
        SyntheticEvaluator::new(),
        classifier,
        EliteArchive::new(space.clone()).unwrap(),
    )
    .seeds(vec![synthetic_seed(6)])
    .seed(5)
    .budget(Budget::evaluations(evaluations));
    if let Some(dir) = dir {
        engine = engine.checkpoint(dir);
    }
    (engine.run_blocking().unwrap().archive, space)
}

fn synthetic_meta() -> RunMeta {
    RunMeta::new(5, &serde_json::json!({"task": "synthetic", "sigma": 0.08})).unwrap()
}

#[test]
fn a_synthetic_10000_candidate_run_opens_in_the_browser() {
    let Some(chrome) = chromium() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let t = Instant::now();
    let (archive, space) = synthetic_engine(
        10_000,
        Some(RunDir::open(tmp.path(), synthetic_meta()).unwrap()),
    );
    eprintln!("synthetic run of 10,000 evaluations: {:.1?}", t.elapsed());

    let t = Instant::now();
    let html = kernelfoundry::explorer::write_report_with(
        tmp.path(),
        Some(space.dimensions.clone()),
        kernelfoundry::explorer::DEFAULT_INLINE_LIMIT,
    )
    .unwrap();
    let size = std::fs::metadata(&html).unwrap().len();
    eprintln!(
        "report.html: {:.1} MB written in {:.1?}",
        size as f64 / 1e6,
        t.elapsed()
    );
    let keep = target_dir().join("explorer");
    std::fs::create_dir_all(&keep).unwrap();
    std::fs::copy(&html, keep.join("synthetic-10000.html")).unwrap();
    let (data, _) = RunData::read(
        &RunFiles::locate(tmp.path()).unwrap(),
        Some(space.dimensions.clone()),
        usize::MAX,
    )
    .unwrap();
    assert_eq!(data.candidates.len(), 10_000);
    assert_eq!(
        data.elites.len(),
        archive.elites().len(),
        "the page's elites are the archive's"
    );

    let page = open_browser(&chrome);
    let t = Instant::now();
    page.goto(&file_url(&html));
    page.tab.wait_for_element("#heatmap .cell.filled").unwrap();
    let wall = t.elapsed();
    let load = page.eval(
        "(() => { const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd || n.domContentLoadedEventEnd; })()",
    );
    let render = page.eval("kfExplorer.renderMs");
    eprintln!(
        "10,000 candidates: page loaded in {:.0} ms (navigation start to load event; script {:.0} ms), {:.0?} as the test saw it",
        load.as_f64().unwrap_or(f64::NAN),
        render.as_f64().unwrap_or(f64::NAN),
        wall
    );
    assert_eq!(
        page.eval("kfExplorer.data().candidates.length"),
        Value::from(10_000)
    );
    assert_eq!(
        page.eval("document.querySelectorAll('#table tbody tr').length"),
        Value::from(100),
        "the table shows one page of rows, not 10,000"
    );
    check_page(&page, &data, "synthetic-10000");
}

// ---------------------------------------------------------------- a real gemm run

#[test]
fn the_page_of_a_real_gemm_run() {
    let Some(chrome) = chromium() else { return };
    if backend_or_skip().is_none() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("gemm");
    let status = Command::new(env!("CARGO_BIN_EXE_kf"))
        .args(["search", "--task", "gemm", "--size", "M=64,N=64,K=64"])
        .args(["--tune-budget", "1", "--no-progress", "--evaluations", "16"])
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    // The search wrote the page itself, next to report.json and the pictures.
    let html = out.join("report.html");
    assert!(html.is_file(), "kf search writes report.html");
    // `kf report` writes the same page again from the directory alone.
    let again = Command::new(env!("CARGO_BIN_EXE_kf"))
        .arg("report")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        again.status.success(),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&again.stdout).trim(),
        html.display().to_string()
    );
    let (data, _) = RunData::read(&RunFiles::locate(&out).unwrap(), None, usize::MAX).unwrap();
    assert_eq!(
        data.dimensions.len(),
        3,
        "report.json's space names the dimensions"
    );
    assert!(data.candidates.iter().any(|c| c.status == "correct"));
    let page = open_browser(&chrome);
    page.goto(&file_url(&html));
    check_page(&page, &data, "gemm");
    // A real kernel's evaluation: timing spread and compiler facts are shown.
    let best = data.best.expect("a correct kernel");
    page.eval(&format!("kfExplorer.select({best})"));
    let detail = page.eval("document.getElementById('detail').textContent");
    let detail = detail.as_str().unwrap();
    assert!(
        detail.contains("GFLOP/s") && detail.contains("median, σ"),
        "{detail}"
    );
    assert!(detail.contains("memory_access"), "{detail}");

    // The report's best kernel carries the export note with the commands for this run; any
    // other candidate points at it.
    let export = data
        .export
        .clone()
        .expect("report.json names the best kernel");
    assert!(export.unsupported.is_none());
    page.eval(&format!("kfExplorer.select({})", export.candidate));
    let note = page.eval("document.getElementById('d-export').textContent");
    let note = note.as_str().unwrap();
    assert!(
        note.contains(&format!(
            "kf export --run {} --rust kf-kernels",
            out.display()
        )) && note.contains("--python kf_kernels"),
        "{note}"
    );
    if let Some(other) = data.candidates.iter().find(|c| c.id != export.candidate) {
        page.eval(&format!("kfExplorer.select({})", other.id));
        let note = page.eval("document.getElementById('d-export').textContent");
        assert!(
            note.as_str()
                .unwrap()
                .contains(&format!("#{}", export.candidate)),
            "{note}"
        );
    }

    // Sources not inlined (limit 0) are explained, not broken: the elites' still are.
    kernelfoundry::explorer::write_report_with(&out, None, 0).unwrap();
    let (small, _) = RunData::read(&RunFiles::locate(&out).unwrap(), None, 0).unwrap();
    assert!(!small.sources_complete);
    if let Some(c) = small
        .candidates
        .iter()
        .find(|c| !small.sources.contains_key(&c.src))
    {
        page.goto(&file_url(&html));
        page.tab.wait_for_element("#heatmap svg").unwrap();
        page.eval(&format!("kfExplorer.select({})", c.id));
        assert!(page.wait_for(
            "document.getElementById('code').textContent.includes('kf serve')",
            Duration::from_secs(5)
        ));
    }
    page.no_console_errors();
}

// ---------------------------------------------------------------- kf serve

struct Server {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(dir: &Path, extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_kf"))
        .arg("serve")
        .arg(dir)
        .args(["--port", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .rsplit("http://")
        .next()
        .and_then(|a| a.trim_end_matches('/').parse().ok())
        .unwrap_or_else(|| panic!("kf serve printed {line:?}"));
    Server { child, addr }
}

/// `kf serve` on a synthetic run of `evaluations` evaluations (the folder lives as long as the
/// returned guard).
fn served_synthetic_run(evaluations: u64) -> (tempfile::TempDir, Server) {
    let tmp = tempfile::tempdir().unwrap();
    synthetic_engine(
        evaluations,
        Some(RunDir::open(tmp.path(), synthetic_meta()).unwrap()),
    );
    let server = serve(tmp.path(), &[]);
    (tmp, server)
}

/// A raw HTTP/1.1 GET: the request line exactly as given (HTTP clients would normalise `..`).
fn raw_get(addr: SocketAddr, target: &str) -> (u16, String) {
    raw_get_with(addr, target, &format!("Host: {addr}\r\n"))
}

/// [`raw_get`] with the given header lines (each ending in CRLF) instead of `Host`.
fn raw_get_with(addr: SocketAddr, target: &str, headers: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET {target} HTTP/1.1\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// The step records of a synthetic run, to append to another run directory at our own pace.
fn recorded_steps(evaluations: u64) -> Vec<StepRecord> {
    let tmp = tempfile::tempdir().unwrap();
    synthetic_engine(
        evaluations,
        Some(RunDir::open(tmp.path(), synthetic_meta()).unwrap()),
    );
    kernelfoundry::archive::read_run(tmp.path())
        .unwrap()
        .records
}

#[test]
fn serve_is_loopback_only_and_refuses_path_traversal() {
    let (tmp, server) = served_synthetic_run(60);
    assert!(server.addr.ip().is_loopback(), "bound to {}", server.addr);
    let (status, body) = raw_get(server.addr, "/");
    assert_eq!(status, 200);
    assert!(body.contains("kf-data"));
    for target in [
        "/../../etc/passwd",
        "/..%2F..%2Fetc%2Fpasswd",
        "/api/source/..%2F..%2F..%2Fetc%2Fpasswd",
        "/api/source/../../etc/passwd",
        "/run.json",
        "/steps.jsonl",
    ] {
        let (status, body) = raw_get(server.addr, target);
        assert!(status == 404 || status == 400, "{target}: status {status}");
        assert!(!body.contains("root:"), "{target} leaked /etc/passwd");
    }
    // Sources are handed out by hash, and only by hash.
    let (data, _) = RunData::read(&RunFiles::locate(tmp.path()).unwrap(), None, 0).unwrap();
    let (status, body) = raw_get(
        server.addr,
        &format!("/api/source/{}", data.candidates[0].src),
    );
    assert_eq!(status, 200);
    assert!(body.ends_with("// synthetic kernel"), "{body}");
    let (status, _) = raw_get(server.addr, &format!("/api/source/{}", "0".repeat(64)));
    assert_eq!(status, 404);
    let (status, body) = raw_get(server.addr, "/api/data");
    assert_eq!(status, 200);
    assert!(body.contains("\"live\":true"));
    // Not reachable on this machine's other addresses. On Linux all of 127.0.0.0/8 is the
    // loopback interface, so 127.0.0.2 is always one: a server bound to 127.0.0.1 refuses it,
    // a wildcard binding (0.0.0.0, or [::] with IPv4 mapped) answers. The address the route to
    // a TEST-NET-1 address leaves from is another, where the machine has one.
    let mut others: Vec<std::net::IpAddr> = Vec::new();
    if cfg!(target_os = "linux") {
        others.push(std::net::Ipv4Addr::new(127, 0, 0, 2).into());
    }
    let probe = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
    let routed = probe
        .connect("192.0.2.1:9")
        .ok()
        .and_then(|()| probe.local_addr().ok())
        .map(|a| a.ip())
        .filter(|ip| !ip.is_loopback() && !ip.is_unspecified());
    match routed {
        Some(ip) => others.push(ip),
        // Kind `NON_LOOPBACK_ADDRESS`, not required by CI (whose machine may have no route).
        None => kernelfoundry::core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::NonLoopbackAddress,
            format!(
                "the check on a non-loopback address only: this machine has none{}",
                if cfg!(target_os = "linux") {
                    " (checked on 127.0.0.2 instead)"
                } else {
                    ""
                }
            ),
        ),
    }
    for ip in others {
        let there = SocketAddr::new(ip, server.addr.port());
        assert!(
            TcpStream::connect_timeout(&there, Duration::from_secs(2)).is_err(),
            "kf serve answers on {there}"
        );
        eprintln!("not reachable on {there}: ok");
    }
    // Not a run directory: a clear error, no server.
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_kf"))
        .arg("serve")
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a run directory"));
}

/// DNS rebinding: a page of another name that resolves to the loopback address is refused,
/// whether it asks by its own name (`Host`) or from its own origin (`Origin`).
#[test]
fn serve_answers_only_requests_that_name_it_by_address() {
    let (_tmp, server) = served_synthetic_run(20);
    let port = server.addr.port();
    for host in [format!("{}", server.addr), format!("localhost:{port}")] {
        let (status, _) = raw_get_with(server.addr, "/api/data", &format!("Host: {host}\r\n"));
        assert_eq!(status, 200, "Host: {host}");
    }
    for headers in [
        format!("Host: rebound.example:{port}\r\n"),
        format!("Host: 127.0.0.1:{}\r\n", port.wrapping_add(1)),
        String::new(),
        format!(
            "Host: {}\r\nOrigin: http://rebound.example:{port}\r\n",
            server.addr
        ),
        format!(
            "Host: {}\r\nOrigin: https://{}\r\n",
            server.addr, server.addr
        ),
        format!("Host: {}\r\nOrigin: null\r\n", server.addr),
    ] {
        for target in ["/", "/api/data", "/api/events"] {
            let (status, body) = raw_get_with(server.addr, target, &headers);
            // Without any Host header the HTTP layer may refuse first (400).
            assert!(
                status == 403 || (headers.is_empty() && status == 400),
                "{target} with {headers:?}: status {status}"
            );
            assert!(
                !body.contains("kf-data") && !body.contains("candidates"),
                "{body}"
            );
        }
    }
    let (status, _) = raw_get_with(
        server.addr,
        "/api/data",
        &format!("Host: {0}\r\nOrigin: http://{0}\r\n", server.addr),
    );
    assert_eq!(status, 200, "the page's own origin");

    // The same through a real browser: `rebound.example` resolves to the server's address, as
    // a rebinding DNS server would make it, and neither the page nor a fetch reads the run.
    let Some(chrome) = chromium() else { return };
    let rule = format!(
        "--host-resolver-rules=MAP rebound.example {}",
        server.addr.ip()
    );
    let page = open_browser_with(&chrome, &[&rule]);
    page.tab
        .navigate_to(&format!("http://rebound.example:{port}/"))
        .unwrap();
    assert!(
        page.wait_for(
            "document.readyState === 'complete' && document.body !== null && \
             document.body.innerText.includes('Host header')",
            Duration::from_secs(30)
        ),
        "the rebound page was not refused: {}",
        page.eval("document.body ? document.body.innerText.slice(0, 300) : ''")
    );
    page.eval(
        "window.kfProbe = 'pending'; fetch('/api/data').then(r => r.text()) \
         .then(t => { window.kfProbe = t.includes('candidates') ? 'read' : 'refused'; }) \
         .catch(() => { window.kfProbe = 'refused'; }); true",
    );
    assert!(page.wait_for("window.kfProbe !== 'pending'", Duration::from_secs(15)));
    assert_eq!(page.eval("window.kfProbe"), Value::from("refused"));
    // The server's own address still serves the page in the same browser.
    page.goto(&format!("http://{}/", server.addr));
    page.tab.wait_for_element("#heatmap svg").unwrap();
}

/// At most `MAX_EVENT_STREAMS` event streams are open at once; a closed one frees its place.
#[test]
fn serve_bounds_open_event_streams() {
    use kernelfoundry::explorer::serve::MAX_EVENT_STREAMS;
    let (_tmp, server) = served_synthetic_run(20);
    let open_stream = || {
        let mut s = TcpStream::connect(server.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write!(
            s,
            "GET /api/events HTTP/1.1\r\nHost: {}\r\n\r\n",
            server.addr
        )
        .unwrap();
        let mut head = [0u8; 12];
        s.read_exact(&mut head).unwrap();
        let status: u16 = String::from_utf8_lossy(&head[9..12]).parse().unwrap();
        (s, status)
    };
    let mut held: Vec<TcpStream> = Vec::new();
    for k in 0..MAX_EVENT_STREAMS {
        let (s, status) = open_stream();
        assert_eq!(status, 200, "stream {k}");
        held.push(s);
    }
    let (_, status) = open_stream();
    assert_eq!(status, 503, "one stream over the limit");
    drop(held.pop());
    // The server notices the closed stream at its next write (a poll or a keep-alive).
    let end = Instant::now() + Duration::from_secs(30);
    loop {
        let (s, status) = open_stream();
        if status == 200 {
            drop(s);
            break;
        }
        assert!(
            Instant::now() < end,
            "a closed stream never freed its place"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    let (status, _) = raw_get(server.addr, "/api/data");
    assert_eq!(status, 200, "other routes are not limited");
}

#[test]
fn serve_updates_the_page_live_while_the_run_is_written() {
    let Some(chrome) = chromium() else { return };
    let steps = recorded_steps(400);
    let tmp = tempfile::tempdir().unwrap();
    // This test is the search: it holds the run directory's lock and appends records.
    let mut dir = RunDir::open(tmp.path(), synthetic_meta()).unwrap();
    let (first, rest) = steps.split_at(steps.len() / 3);
    for r in first {
        dir.append(r).unwrap();
    }
    let count = |records: &[StepRecord]| records.iter().map(|r| r.children.len()).sum::<usize>();
    let server = serve(tmp.path(), &[]);
    let page = open_browser(&chrome);
    page.goto(&format!("http://{}/", server.addr));
    page.tab.wait_for_element("#heatmap svg").unwrap();
    assert_eq!(
        page.eval("document.getElementById('s-evals').textContent"),
        Value::from(count(first).to_string())
    );
    assert!(page
        .eval("document.getElementById('live').textContent")
        .as_str()
        .unwrap()
        .contains("live"));
    // Pick a candidate; it stays selected across updates.
    let picked = page
        .eval("kfExplorer.data().candidates[0].id")
        .as_u64()
        .unwrap();
    page.eval(&format!("kfExplorer.select({picked})"));
    for (k, r) in rest.iter().enumerate() {
        dir.append(r).unwrap();
        if k % 40 == 0 {
            std::thread::sleep(Duration::from_millis(150));
        }
    }
    let total = count(&steps);
    assert!(
        page.wait_for(
            &format!("document.getElementById('s-evals').textContent === '{total}'"),
            Duration::from_secs(15)
        ),
        "the page shows all {total} evaluations; it shows {}",
        page.eval("document.getElementById('s-evals').textContent")
    );
    assert!(page.eval("kfExplorer.updates").as_u64().unwrap() >= 1);
    assert_eq!(
        page.eval(&format!(
            "document.getElementById('d-title').textContent.startsWith('#{picked} ')"
        )),
        Value::Bool(true)
    );
    // A source not inlined is loaded on demand from the server.
    let last = page
        .eval("kfExplorer.data().candidates.at(-1).id")
        .as_u64()
        .unwrap();
    page.eval(&format!("kfExplorer.select({last})"));
    assert!(page.wait_for(
        "document.getElementById('code').textContent.includes('synthetic kernel')",
        Duration::from_secs(5)
    ));
    page.screenshot("serve-live.png");
    page.no_console_errors();
    drop(dir);
}

// ---------------------------------------------------------------- without a browser

#[test]
fn the_page_data_matches_the_archive_and_cannot_be_broken_out_of() {
    let tmp = tempfile::tempdir().unwrap();
    let (archive, space) = synthetic_engine(
        300,
        Some(RunDir::open(tmp.path(), synthetic_meta()).unwrap()),
    );
    let files = RunFiles::locate(tmp.path()).unwrap();
    let (mut data, sources) =
        RunData::read(&files, Some(space.dimensions.clone()), usize::MAX).unwrap();
    assert_eq!(data.candidates.len(), 300);
    let mut elites: Vec<u64> = archive.elites().iter().map(|e| e.candidate.id.0).collect();
    elites.sort_unstable();
    assert_eq!(
        data.elites, elites,
        "the elites replayed from the log are the archive's"
    );
    assert!(data.sources_complete);
    assert_eq!(data.sources.len(), sources.len());
    assert_eq!(data.curve.last().unwrap().filled, elites.len());
    // A kernel source (or an LLM reply) holding `</script>` cannot end the data block.
    let key = data.candidates[0].src.clone();
    data.sources
        .insert(key, "</script><script>alert(1)</script><!--".into());
    let html = kernelfoundry::explorer::render_page(&data);
    assert_eq!(
        html.matches("</script>").count(),
        2,
        "only the page's own two script ends"
    );
    assert!(!html.contains("<script>alert"));
    // Not a run: a typed error.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        kernelfoundry::explorer::write_report(empty.path()),
        Err(kernelfoundry::explorer::ExplorerError::NotARun(_))
    ));
}

// ---------------------------------------------------------------- roofline, LLM children, workers

/// A synthetic run extended with what real runs record: roofline figures on every judged
/// child, an LLM child with its recorded exchange (rendered from kf-prompt's own components
/// and templates), and half the children evaluated by named workers of a distributed run.
fn extended_run(dir: &Path) -> (u64, Vec<StepRecord>) {
    use kernelfoundry::core::ChildRecord;
    let mut steps = recorded_steps(120);
    let mut llm_child = None;
    let mut llm_step = 0;
    for r in steps.iter_mut() {
        for child in r.children.iter_mut() {
            if let ChildRecord::Judged { elite, .. } = child {
                let ev = &mut elite.evaluation;
                ev.roofline_fraction = Some(0.25 + (elite.candidate.id.0 % 50) as f64 / 100.0);
                ev.memory_bound = Some(false);
                ev.gbs = Some(12.5);
                if elite.candidate.id.0 % 2 == 0 {
                    ev.worker = Some(format!("worker-{}", elite.candidate.id.0 % 3));
                }
                if !elite.candidate.parents.is_empty() {
                    llm_child = Some(elite.candidate.id.0);
                    llm_step = r.step;
                }
            }
        }
    }
    let llm_child = llm_child.unwrap();
    for r in steps.iter_mut().filter(|r| r.step == llm_step) {
        for child in r.children.iter_mut() {
            if let ChildRecord::Judged { elite, .. } = child {
                if elite.candidate.id.0 == llm_child {
                    elite.candidate.origin.model = Some("test-model".into());
                    elite.candidate.origin.prompt_variant = Some("v0".into());
                    elite.candidate.origin.note = "parsed a fenced kernel after 1 repair".into();
                }
            }
        }
    }
    let mut run = RunDir::open(dir, synthetic_meta()).unwrap();
    for r in &steps {
        run.append(r).unwrap();
    }
    drop(run);
    let system = kf_prompt::render_system(
        &kf_prompt::PromptComponents::builtin(),
        &kf_prompt::PromptTemplates::builtin(),
        "OpenCL C",
    );
    let request = kf_prompt::ChatRequest::new(
        "test-model",
        vec![
            kf_prompt::ChatMessage::system(system),
            kf_prompt::ChatMessage::user(
                "# Task\nMultiply.\n\n# Current kernel\n```c\n# not a heading\n```",
            ),
        ],
    );
    let response: kf_prompt::ChatResponse = serde_json::from_value(serde_json::json!({
        "content": "Here is the kernel: REPLY-MARKER",
        "model": "test-model",
        "usage": {"prompt_tokens": 10, "completion_tokens": 5},
    }))
    .unwrap();
    let record = kf_prompt::ExchangeRecord::new(
        kf_prompt::ExchangeKey {
            hash: request.content_hash(),
            scope: format!("step-{llm_step}"),
            occurrence: 0,
            seq: 0,
        },
        request,
        kf_prompt::ExchangeOutcome::Answer { response },
        0.0,
        12,
    );
    std::fs::write(
        dir.join(kf_prompt::EXCHANGES_FILE),
        serde_json::to_string(&record).unwrap() + "\n",
    )
    .unwrap();
    (llm_child, steps)
}

#[test]
fn the_elite_panel_shows_roofline_prompt_components_and_workers() {
    let tmp = tempfile::tempdir().unwrap();
    let (llm_child, _) = extended_run(tmp.path());
    let files = RunFiles::locate(tmp.path()).unwrap();
    let (data, _) = RunData::read(&files, None, usize::MAX).unwrap();
    let best = data.best.unwrap();
    let row = data.candidates.iter().find(|c| c.id == best).unwrap();
    assert!(
        row.roofline.is_some(),
        "the roofline fraction reaches the page data"
    );
    assert!(data.candidates.iter().any(|c| c.worker.is_some()));
    let Some(chrome) = chromium() else { return };
    let html = kernelfoundry::explorer::write_report(tmp.path()).unwrap();
    let page = open_browser(&chrome);
    page.goto(&file_url(&html));
    page.tab.wait_for_element("#heatmap svg").unwrap();

    // The best elite: its roofline fraction, as the page data has it.
    page.eval(&format!("kfExplorer.select({best})"));
    let shown = page.eval("document.getElementById('d-roofline').textContent");
    let expected = 100.0 * row.roofline.unwrap();
    let shown_pct: f64 = shown
        .as_str()
        .unwrap()
        .trim_end_matches('%')
        .parse()
        .unwrap();
    assert!(
        (shown_pct - expected).abs() < 0.5,
        "{shown:?} vs {expected}"
    );
    assert!(page
        .eval("document.getElementById('s-best').textContent")
        .as_str()
        .unwrap()
        .contains("% of roofline"));

    // The worker column of the candidate table, and the worker in the panel.
    assert_eq!(
        page.eval("!!document.querySelector('th[data-k=worker]')"),
        Value::Bool(true)
    );
    assert_eq!(
        page.eval("[...document.querySelectorAll('#table tbody td')].some((td) => td.textContent.startsWith('worker-'))"),
        Value::Bool(true),
        "some row names its worker"
    );
    let with_worker = data.candidates.iter().find(|c| c.worker.is_some()).unwrap();
    page.eval(&format!("kfExplorer.select({})", with_worker.id));
    assert_eq!(
        page.eval("document.getElementById('d-worker').textContent"),
        Value::from(with_worker.worker.clone().unwrap())
    );

    // The LLM child: its prompt by component, the reply, the parse/repair outcome.
    page.eval(&format!("kfExplorer.select({llm_child})"));
    let titles = page.eval(
        "JSON.stringify([...document.querySelectorAll('#detail .comp-title')].map((s) => s.textContent))",
    );
    let titles: Vec<String> = serde_json::from_str(titles.as_str().unwrap()).unwrap();
    for c in kf_prompt::PromptComponents::builtin().iter() {
        assert!(
            titles.contains(&c.title),
            "component {:?} shown; titles {titles:?}",
            c.title
        );
    }
    assert!(titles.contains(&"Task".to_owned()));
    assert!(
        !titles.iter().any(|t| t.contains("not a heading")),
        "a line inside a code fence is not a heading"
    );
    let detail = page.eval("document.getElementById('detail').textContent");
    let detail = detail.as_str().unwrap();
    assert!(detail.contains("REPLY-MARKER"), "the reply is shown");
    assert!(detail.contains("parse/repair outcome"));
    assert!(detail.contains("after 1 repair"));
    page.screenshot("llm-child.png");
    page.no_console_errors();
}
