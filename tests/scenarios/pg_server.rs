//! A PostgreSQL server for the tests and the warehouse bench: Debian's `postgresql` package
//! (which `.ci/run` installs when it is missing), started on a free loopback port, as a plain
//! user when run as root (the server refuses root). The bench includes this file by its path.

use docpipe::store::pg::{PASSWORD_ENV, Pg};
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command};

/// The password of the test server's user.
pub const PASSWORD: &str = "pg-test-secret-7731";

/// A PostgreSQL server on `127.0.0.1` with one user, `docpipe`, whose password is
/// [`PASSWORD`]; stopped when dropped.
pub struct Postgres {
    child: Option<Child>,
    dir: tempfile::TempDir,
    /// The folder of the server's programs.
    pub bin: PathBuf,
    owner: Option<(u32, u32)>,
    /// The port.
    pub port: u16,
}

impl Drop for Postgres {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The folder of the server's programs: `DOCPIPE_TEST_PG_BIN`, `pg_config --bindir`, or
/// Debian's `/usr/lib/postgresql/<version>/bin`.
fn pg_bin() -> PathBuf {
    if let Some(p) = std::env::var_os("DOCPIPE_TEST_PG_BIN") {
        return p.into();
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").exists() {
            return dir;
        }
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path().join("bin"))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop().expect(
        "PostgreSQL's programs not found: run .ci/run, which installs Debian's postgresql package",
    )
}

/// The user and group ids of a plain user to run the server as, when the tests run as root.
fn plain_user() -> Option<(u32, u32)> {
    let me = std::fs::metadata("/proc/self").unwrap().uid();
    if me != 0 {
        return None;
    }
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    ["postgres", "nobody"].iter().find_map(|name| {
        passwd.lines().find_map(|l| {
            let f: Vec<&str> = l.split(':').collect();
            (f.len() > 3 && f[0] == *name).then(|| (f[2].parse().unwrap(), f[3].parse().unwrap()))
        })
    })
}

impl Postgres {
    /// Creates a database cluster in a temporary folder and starts the server.
    pub fn start() -> Self {
        let bin = pg_bin();
        let owner = plain_user();
        let dir = tempfile::tempdir().unwrap();
        let pwfile = dir.path().join("pw");
        std::fs::write(&pwfile, PASSWORD).unwrap();
        if let Some((uid, gid)) = owner {
            for p in [dir.path(), &pwfile] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid)).unwrap();
            }
        }
        let out = Self::as_owner(owner, Command::new(bin.join("initdb")))
            .arg("-D")
            .arg(dir.path().join("data"))
            .args(["-U", "docpipe", "--auth=scram-sha-256", "--no-sync"])
            .arg(format!("--pwfile={}", pwfile.display()))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let port = free_port();
        let mut pg = Self {
            child: None,
            dir,
            bin,
            owner,
            port,
        };
        pg.resume();
        pg
    }

    fn as_owner(owner: Option<(u32, u32)>, mut cmd: Command) -> Command {
        if let Some((uid, gid)) = owner {
            cmd.uid(uid).gid(gid);
        }
        cmd
    }

    /// Starts the server (again) on its port and waits until it answers.
    pub fn resume(&mut self) {
        let data = self.dir.path().join("data");
        let child = Self::as_owner(self.owner, Command::new(self.bin.join("postgres")))
            .arg("-D")
            .arg(&data)
            .args([
                "-p",
                &self.port.to_string(),
                "-c",
                "listen_addresses=127.0.0.1",
            ])
            .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
            .arg("-k")
            .arg(self.dir.path())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = std::time::Instant::now();
        loop {
            let ready = Command::new(self.bin.join("pg_isready"))
                .args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-q"])
                .status()
                .unwrap();
            if ready.success() {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_secs(30),
                "postgres did not start on port {}",
                self.port
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// The server's process id (its postmaster's), while it runs (the warehouse bench reads
    /// the server's CPU from it).
    #[allow(dead_code)]
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Stops the server (a fast shutdown: connections are closed).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SAFETY: a signal to our own child process.
            unsafe {
                libc::kill(child.id() as i32, libc::SIGINT);
            }
            let _ = child.wait();
        }
    }

    /// The database's URL (no password: that goes in [`PASSWORD_ENV`]).
    pub fn url(&self) -> String {
        format!("postgres://docpipe@127.0.0.1:{}/postgres", self.port)
    }

    /// Opens a connection with the password in the environment.
    pub fn open(&self) -> Pg {
        // SAFETY: every test that reads it sets the same value.
        unsafe { std::env::set_var(PASSWORD_ENV, PASSWORD) };
        Pg::open(&self.url()).unwrap()
    }

    /// Runs a query with psql and returns its unaligned output.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new(self.bin.join("psql"))
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(["-U", "docpipe", "-d", "postgres", "-At", "-c", sql])
            .env("PGPASSWORD", PASSWORD)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    }
}

/// A port free on the loopback address.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
