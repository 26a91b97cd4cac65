//! Real servers for the tests: the PostgreSQL server `scripts/dist-servers.sh start` runs (one
//! fresh database per test) and nats-server processes each test starts, kills and restarts
//! itself, from the binary that script installed.

#![allow(dead_code, unreachable_pub)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the servers are.
pub struct Servers {
    /// The superuser's URL (the Unix socket of `scripts/dist-servers.sh`'s server).
    pub database_url: String,
    pub nats_server: PathBuf,
    /// The deployment's secrets (`dist-secrets/`: CA, credentials, keys, nats.conf), when the
    /// servers run with security on.
    pub secrets: Option<PathBuf>,
}

impl Servers {
    /// The NATS configuration the tests' own nats-servers start with (TLS and the roles).
    pub fn nats_config(&self) -> Option<PathBuf> {
        self.secrets.as_ref().map(|s| s.join("nats.conf"))
    }
}

/// The servers, or `None` (with a message, the skip recorded) when they are not running; with
/// `KF_REQUIRE_DIST=1` a missing server fails the test instead.
#[track_caller]
pub fn servers(test: &str) -> Option<Servers> {
    // KF_DIST_DIR: servers started with `KF_DIST_DIR=… scripts/dist-servers.sh start`.
    let (_, dir) = root_and_dist_dir();
    let info: Option<serde_json::Value> = std::fs::read_to_string(dir.join("dist-servers.json"))
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok());
    let from_info = |k: &str| info.as_ref().and_then(|i| i[k].as_str().map(String::from));
    // The superuser, through the server's Unix socket: it creates the tests' databases.
    let database_url = std::env::var("KF_DATABASE_URL")
        .ok()
        .or_else(|| from_info("admin_url"))
        .or_else(|| from_info("database_url"));
    let nats_server = std::env::var("KF_NATS_SERVER")
        .ok()
        .or_else(|| from_info("nats_server"));
    let secrets = std::env::var_os("KF_DIST_SECRETS")
        .map(PathBuf::from)
        .or_else(|| from_info("secrets").map(PathBuf::from))
        .filter(|s| s.join("nats.conf").exists());
    let found = match (database_url, nats_server) {
        (Some(db), Some(nats)) if Path::new(&nats).exists() && pg_answers(&db) => Some(Servers {
            database_url: db,
            nats_server: PathBuf::from(nats),
            secrets,
        }),
        _ => None,
    };
    if found.is_none() {
        // Kind `DIST`: KF_REQUIRE_DIST=1 makes this a failure.
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Dist,
            format_args!(
                "{test}: no PostgreSQL/nats-server (run `scripts/dist-servers.sh install && \
                 scripts/dist-servers.sh start`)"
            ),
        );
    }
    found
}

/// The workspace root (this file serves kf-dist's tests and the facade's) and the folder of
/// `scripts/dist-servers.sh`'s servers (`KF_DIST_DIR`, else `.runtime`).
fn root_and_dist_dir() -> (PathBuf, PathBuf) {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let root = manifest
        .ancestors()
        .find(|p| p.join("Cargo.lock").exists())
        .unwrap_or(manifest)
        .to_path_buf();
    let dir = std::env::var_os("KF_DIST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join(".runtime"));
    (root, dir)
}

/// Whether [`restart_postgres`] can restart the server: `scripts/dist-servers.sh` started it.
/// Says why not (the servers were given by `KF_DATABASE_URL` alone) when it cannot, and records
/// the skip, kind `DIST`: under `KF_REQUIRE_DIST=1` (CI, whose servers that script starts) a
/// failure.
#[track_caller]
pub fn can_restart_postgres(test: &str) -> bool {
    let info = root_and_dist_dir().1.join("dist-servers.json");
    if !info.exists() {
        kf_core::testing::skip::skip(
            kf_core::testing::skip::SkipKind::Dist,
            format_args!(
                "{test}: the PostgreSQL server was not started by scripts/dist-servers.sh \
                 (no {}), so it cannot be restarted",
                info.display()
            ),
        );
    }
    info.exists()
}

/// Restarts the PostgreSQL server of `scripts/dist-servers.sh` (fast shutdown: every
/// connection is cut), down for `down_s` seconds.
pub fn restart_postgres(down_s: u32) {
    let (root, dir) = root_and_dist_dir();
    let status = Command::new(root.join("scripts/dist-servers.sh"))
        .arg("restart-postgres")
        .arg(down_s.to_string())
        .env("KF_DIST_DIR", &dir)
        .status()
        .expect("scripts/dist-servers.sh runs");
    assert!(
        status.success(),
        "scripts/dist-servers.sh restart-postgres failed"
    );
}

fn pg_answers(url: &str) -> bool {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(5),
            tokio_postgres::connect(url, tokio_postgres::NoTls),
        )
        .await
        .is_ok_and(|r| r.is_ok())
    })
}

/// A runtime for the tests' own database queries.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

/// A client of `url` (its connection driven by the current runtime).
async fn connect(url: &str) -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c
}

/// The schema and the roles' rights, applied by the superuser to each test's database.
const SCHEMA: &str = include_str!("../../sql/schema.sql");

/// A database of the test's own, dropped at the end.
pub struct TestDb {
    admin: String,
    name: String,
    /// The superuser's URL of this database (the tests' own queries).
    pub admin_url: String,
    /// The URL the searches and workers use: TCP (TLS and a role's password where the server
    /// runs with security on).
    pub url: String,
}

impl TestDb {
    pub fn create(admin_url: &str, test: &str) -> TestDb {
        let name = format!("kf_{}_{}", test, std::process::id());
        let base = admin_url
            .rsplit_once('/')
            .map(|(b, _)| b)
            .unwrap_or(admin_url);
        let db_admin_url = format!("{base}/{name}");
        runtime().block_on(async {
            let c = connect(admin_url).await;
            // Separate statements: a multi-statement string runs as one transaction.
            c.batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                .await
                .unwrap();
            c.batch_execute(&format!("CREATE DATABASE {name}"))
                .await
                .unwrap();
            let c = connect(&db_admin_url).await;
            c.batch_execute(&format!("BEGIN; {SCHEMA} COMMIT;"))
                .await
                .unwrap();
        });
        // A socket URL (`postgresql://postgres@%2Fdir:PORT/db`): the roles come over TCP.
        let url = match base.split_once("%2F") {
            Some(_) => {
                let port = base.rsplit_once(':').map_or("5432", |(_, p)| p);
                format!("postgres://127.0.0.1:{port}/{name}")
            }
            None => db_admin_url.clone(),
        };
        TestDb {
            admin: admin_url.to_string(),
            admin_url: db_admin_url,
            url,
            name,
        }
    }

    /// Runs a query returning one integer.
    pub fn count(&self, sql: &str) -> i64 {
        runtime().block_on(async {
            let c = connect(&self.admin_url).await;
            c.query_one(sql, &[]).await.unwrap().get::<_, i64>(0)
        })
    }

    /// Runs a query and returns its rows as text columns.
    pub fn rows(&self, sql: &str) -> Vec<Vec<String>> {
        runtime().block_on(async {
            let c = connect(&self.admin_url).await;
            c.query(sql, &[])
                .await
                .unwrap()
                .iter()
                .map(|r| (0..r.len()).map(|i| r.get::<_, String>(i)).collect())
                .collect()
        })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let rt = runtime();
        let (admin, name) = (self.admin.clone(), self.name.clone());
        rt.block_on(async move {
            if let Ok((c, conn)) = tokio_postgres::connect(&admin, tokio_postgres::NoTls).await {
                tokio::spawn(conn);
                let _ = c
                    .batch_execute(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
                    .await;
            }
        });
    }
}

/// A nats-server with JetStream on a free loopback port, its store in a folder of its own.
pub struct Nats {
    bin: PathBuf,
    /// The deployment's nats.conf (TLS, users, permissions), if any.
    config: Option<PathBuf>,
    dir: tempfile::TempDir,
    pub port: u16,
    child: Option<Child>,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_listening(port: u16, limit: Duration) -> bool {
    let start = Instant::now();
    while start.elapsed() < limit {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

impl Nats {
    /// A nats-server with the servers' configuration (TLS and the roles, when security is on).
    pub fn start(servers: &Servers) -> Nats {
        Self::start_with(&servers.nats_server, servers.nats_config().as_deref())
    }

    pub fn start_with(bin: &Path, config: Option<&Path>) -> Nats {
        let mut n = Nats {
            bin: bin.to_path_buf(),
            config: config.map(Path::to_path_buf),
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
            child: None,
        };
        n.launch();
        n
    }

    fn launch(&mut self) {
        let mut command = Command::new(&self.bin);
        if let Some(config) = &self.config {
            command.arg("-c").arg(config);
        }
        let child = command
            .args([
                "-a",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-js",
                "-sd",
            ])
            .arg(self.dir.path().join("store"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        assert!(
            wait_listening(self.port, Duration::from_secs(10)),
            "nats-server did not start"
        );
    }

    /// The folder of its JetStream store.
    pub fn store_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The server's process id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    pub fn url(&self) -> String {
        let scheme = if self.config.is_some() { "tls" } else { "nats" };
        format!("{scheme}://127.0.0.1:{}", self.port)
    }

    /// SIGKILL, then the same server again on the same port and store.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    pub fn restart(&mut self) {
        self.kill();
        self.launch();
    }
}

impl Drop for Nats {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The deployment's secrets as they could leak: the passwords of both roles' credentials and
/// the lines of both private keys.
pub fn secret_strings(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for role in ["search", "worker"] {
        let text = std::fs::read_to_string(dir.join(format!("{role}.cred"))).unwrap();
        let cred: serde_json::Value = serde_json::from_str(&text).unwrap();
        for k in ["nats_password", "database_password"] {
            out.push(cred[k].as_str().unwrap().to_string());
        }
        let pem = std::fs::read_to_string(dir.join(format!("{role}.key"))).unwrap();
        out.extend(
            pem.lines()
                .filter(|l| !l.starts_with("-----"))
                .map(String::from),
        );
    }
    assert!(
        out.iter().all(|s| s.len() >= 16),
        "secrets too short to search for"
    );
    out
}

/// Everything a run wrote, as text: every file under `dirs` (but `skip`) and every row of
/// every table of the test's database.
pub fn everything_written(db: &TestDb, dirs: &[&Path], skip: &[&Path]) -> String {
    let mut written = String::new();
    let mut todo: Vec<PathBuf> = dirs.iter().map(|d| d.to_path_buf()).collect();
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                todo.push(p);
            } else if !skip.contains(&p.as_path()) {
                written.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
            }
        }
    }
    for table in db.rows("SELECT tablename::text FROM pg_tables WHERE schemaname = 'public'") {
        for row in db.rows(&format!("SELECT t::text FROM {} t", table[0])) {
            written.push_str(&row[0]);
        }
    }
    written
}
