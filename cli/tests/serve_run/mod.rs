//! Running `k2rpq serve` in tests: a store, a server on a free port of the loopback, and
//! its request log.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A small family graph: a, b, c in a `parent` chain, d a parent of c; names for some.
pub const FAMILY: &str = "<http://e/a> <http://e/parent> <http://e/b> .\n\
     <http://e/b> <http://e/parent> <http://e/c> .\n\
     <http://e/d> <http://e/parent> <http://e/c> .\n\
     <http://e/b> <http://e/name> \"Bea\" .\n\
     <http://e/c> <http://e/name> \"Cy\" .\n";

/// Loads `nt` (N-Triples text, or a file path when `from_file`) into `DIR/s`.
pub fn load(dir: &Path, nt: &str) -> PathBuf {
    std::fs::write(dir.join("g.nt"), nt).unwrap();
    load_file(dir, &dir.join("g.nt"))
}

/// Loads an RDF file into `DIR/s`.
pub fn load_file(dir: &Path, file: &Path) -> PathBuf {
    let out = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
        .args(["load", "--quiet", "--store", "s"])
        .arg(file)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    dir.join("s")
}

/// A running `k2rpq serve`; killed when dropped.
pub struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `k2rpq serve --store STORE --bind 127.0.0.1:0 --engine cpu ARGS` and waits
    /// for the address it listens on.
    pub fn start(store: &Path, args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_k2rpq"))
            .args([
                "serve",
                "--bind",
                "127.0.0.1:0",
                "--engine",
                "cpu",
                "--store",
            ])
            .arg(store)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(Vec::new()));
        let (found, address) = mpsc::channel();
        let lines = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if let Some(rest) = line.split_once(" on http://").map(|(_, r)| r) {
                    let addr = rest.split('/').next().unwrap_or_default().to_owned();
                    let _ = found.send(addr);
                }
                lines.lock().unwrap().push(line);
            }
        });
        let address = match address.recv_timeout(Duration::from_secs(60)) {
            Ok(a) => a,
            Err(_) => {
                let _ = child.kill();
                panic!("the server did not start: {:?}", log.lock().unwrap());
            }
        };
        Server {
            child,
            base: format!("http://{address}"),
            log,
        }
    }

    /// `BASE/PATH`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The lines of stderr so far.
    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    /// Waits until a line of stderr contains `text` (up to 10 s); the line.
    pub fn wait_for_log(&self, text: &str) -> String {
        let start = Instant::now();
        loop {
            if let Some(l) = self.log().into_iter().find(|l| l.contains(text)) {
                return l;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "no log line with {text:?}: {:?}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM and waits (up to 20 s) for the exit; its status and stderr.
    pub fn terminate(mut self) -> (std::process::ExitStatus, Vec<String>) {
        // SAFETY: a plain kill(2) of the child this test started.
        let sent = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        assert_eq!(sent, 0);
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                // The reader of stderr takes the last lines after the exit.
                std::thread::sleep(Duration::from_millis(200));
                return (status, self.log());
            }
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "still running 20 s after SIGTERM"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A blocking HTTP client without proxies (the loopback only).
pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}
