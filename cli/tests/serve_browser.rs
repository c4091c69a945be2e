//! The query page in a real headless browser: Chromium, driven through chromedriver
//! (WebDriver), opens the page of `k2rpq serve`, runs a query with YASGUI's button and
//! finds the answer's rows in the results table. Reports "skipped" (and passes) where
//! Chromium or chromedriver is not installed (Debian: `chromium`, `chromium-driver`).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{ClientBuilder, Locator};

#[path = "serve_run/mod.rs"]
mod serve_run;
use serve_run::{load, Server, FAMILY};

/// The first of `names` found on the PATH or in /usr/bin.
fn find_program(names: &[&str]) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs: Vec<PathBuf> = std::env::split_paths(&path).collect();
    dirs.push(PathBuf::from("/usr/bin"));
    names
        .iter()
        .flat_map(|n| dirs.iter().map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

/// chromedriver on a free port of the loopback; killed when dropped.
struct Driver {
    child: Child,
    port: u16,
}

impl Driver {
    fn start(program: &Path) -> Driver {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(program)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let start = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Driver { child, port }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_query_page_runs_a_query_in_a_browser() {
    let (Some(driver), Some(chromium)) = (
        find_program(&["chromedriver"]),
        find_program(&["chromium", "chromium-browser", "google-chrome"]),
    ) else {
        eprintln!("skipped: no chromium and chromedriver (Debian: apt-get install chromium chromium-driver)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let store = load(dir.path(), FAMILY);
    let server = Server::start(&store, &[]);
    let driver = Driver::start(&driver);
    let profile = dir.path().join("profile");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let rows = runtime.block_on(async {
        let mut capabilities = serde_json::Map::new();
        capabilities.insert(
            "goog:chromeOptions".into(),
            serde_json::json!({
                "binary": chromium,
                "args": [
                    "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--disable-background-networking", "--disable-component-update",
                    "--no-first-run", format!("--user-data-dir={}", profile.display()),
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let browser = ClientBuilder::new(connector)
            .capabilities(capabilities)
            .connect(&format!("http://127.0.0.1:{}", driver.port))
            .await
            .expect("a WebDriver session");
        let result = run_query_on_page(&browser, &server.base).await;
        let _ = browser.close().await;
        result
    });
    let rows = rows.unwrap_or_else(|e| panic!("{e}; server log: {:?}", server.log()));
    // The four pairs of `parent+`, each a row of the table.
    for (x, y) in [("a", "b"), ("a", "c"), ("b", "c"), ("d", "c")] {
        assert!(
            rows.iter()
                .any(|r| r.contains(&format!("http://e/{x}"))
                    && r.contains(&format!("http://e/{y}"))),
            "no row {x} {y} in {rows:?}"
        );
    }
    assert_eq!(rows.len(), 4, "{rows:?}");
    server.wait_for_log("POST /query 200 4 rows");
}

/// Opens the page, types the query, presses the run button and returns the text of each
/// row of the results table.
async fn run_query_on_page(
    browser: &fantoccini::Client,
    base: &str,
) -> Result<Vec<String>, String> {
    let failed = |what: &str| {
        let what = what.to_owned();
        move |e: fantoccini::error::CmdError| format!("{what}: {e}")
    };
    browser
        .goto(&format!("{base}/"))
        .await
        .map_err(failed("opening the page"))?;
    browser
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css(".yasqe .CodeMirror"))
        .await
        .map_err(failed("waiting for the editor"))?;
    // The editor is CodeMirror: set its text as typing would.
    browser
        .execute(
            "document.querySelector('.yasqe .CodeMirror').CodeMirror.setValue(arguments[0]);",
            vec![serde_json::json!(
                "SELECT ?x ?y WHERE { ?x <http://e/parent>+ ?y }"
            )],
        )
        .await
        .map_err(failed("typing the query"))?;
    browser
        .find(Locator::Css(".yasqe_queryButton"))
        .await
        .map_err(failed("finding the run button"))?
        .click()
        .await
        .map_err(failed("pressing the run button"))?;
    let start = Instant::now();
    loop {
        let rows = browser
            .find_all(Locator::Css(".yasr table tbody tr"))
            .await
            .map_err(failed("reading the results table"))?;
        let mut texts = Vec::new();
        for row in rows {
            texts.push(row.text().await.map_err(failed("reading a row"))?);
        }
        if texts.iter().filter(|t| t.contains("http://e/")).count() >= 4 {
            return Ok(texts);
        }
        if start.elapsed() > Duration::from_secs(30) {
            let page = browser.source().await.unwrap_or_default();
            return Err(format!(
                "no results table after 30 s: rows {texts:?}; page: {}",
                &page[..page.len().min(3000)]
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
