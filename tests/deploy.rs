//! `deploy/Dockerfile` and `deploy/kubernetes.yaml` kept honest: the manifest runs the image's
//! command, names the ports that command listens on, probes paths the example serves there, and
//! gives the drain its time. The built `coach` example is run with those arguments (addresses moved
//! to free loopback ports), its probes and metrics are read over HTTP, and SIGTERM drains it. The
//! autoscaler scales on what the image exports before a pod refuses calls, and the disruption
//! budget lets a node drain.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

pub(crate) fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(repo().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The JSON array after `instruction ` on its line of the Dockerfile.
fn exec_form(dockerfile: &str, instruction: &str) -> Vec<String> {
    let line = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix(instruction)?.strip_prefix(' '))
        .unwrap_or_else(|| panic!("the Dockerfile has no {instruction}"));
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{instruction} is not exec form: {e}"))
}

/// What the manifest says of its one container. Read line by line: the file is ours and keeps to
/// one layout, which this reader insists on (it panics on anything else).
#[derive(Debug, Default)]
struct Manifest {
    args: Vec<String>,
    /// (name, containerPort)
    ports: Vec<(String, u16)>,
    /// (probe, path, port name)
    probes: Vec<(String, String, String)>,
    grace_s: u64,
    /// The preStop sleep, in s.
    pre_stop_s: u64,
    /// The container's CPU request, in CPUs.
    cpu_request: f64,
}

fn manifest(yaml: &str) -> Manifest {
    let mut m = Manifest::default();
    let mut section = "";
    let mut port_name = None;
    let mut probe_path = None;
    for line in yaml.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('#') || trimmed.is_empty() {
            continue;
        }
        let value = |key: &str| trimmed.strip_prefix(key).map(str::trim);
        if let Some(s) = value("terminationGracePeriodSeconds:") {
            m.grace_s = s
                .parse()
                .expect("terminationGracePeriodSeconds is a number");
        } else if let Some(s) = value("seconds:") {
            m.pre_stop_s = s.parse().expect("the preStop sleep is a number");
        } else if let Some(cpu) = value("cpu:") {
            m.cpu_request = match cpu.strip_suffix('m') {
                Some(milli) => milli.parse::<f64>().expect("millicores") / 1000.0,
                None => cpu.parse().expect("CPUs"),
            };
        } else if trimmed == "args:" {
            section = "args";
        } else if trimmed == "ports:" && section != "service" {
            section = "ports";
        } else if let Some(probe) = ["readinessProbe:", "livenessProbe:"]
            .into_iter()
            .find(|p| trimmed == *p)
        {
            section = probe.trim_end_matches(':');
        } else if trimmed.starts_with("kind: Service") {
            section = "service";
        } else if section == "args" && trimmed.starts_with("- ") {
            let arg: String = serde_json::from_str(&trimmed[2..]).expect("args are quoted");
            m.args.push(arg);
        } else if section == "ports" {
            if let Some(name) = value("- name:") {
                port_name = Some(name.to_owned());
            } else if let Some(port) = value("containerPort:") {
                let name = port_name.take().expect("each port is named");
                m.ports.push((name, port.parse().expect("a port number")));
            } else {
                section = "";
            }
        } else if section.ends_with("Probe") {
            if let Some(path) = value("path:") {
                probe_path = Some(path.to_owned());
            } else if let Some(port) = value("port:") {
                let path = probe_path.take().expect("the probe's path comes first");
                m.probes.push((section.to_owned(), path, port.to_owned()));
                section = "";
            }
        } else if !line.starts_with("            ") {
            section = if section == "service" { "service" } else { "" };
        }
    }
    m
}

/// The manifest's documents (split at `---`), each flattened to `path = value`, as
/// `spec.metrics[1].pods.metric.name = voqalize_calls_open`: keys joined with `.`, list items
/// numbered. Comments and quotes go; a flow value (`["ALL"]`) stays text. Our files keep to
/// block style with indented lists, which is all this reads.
fn documents(yaml: &str) -> Vec<BTreeMap<String, String>> {
    let mut docs = vec![BTreeMap::new()];
    // (indent, path) of the keys and items open above the line.
    let mut open: Vec<(usize, String)> = Vec::new();
    let mut items: BTreeMap<String, usize> = BTreeMap::new();
    for line in yaml.lines() {
        let text = line.trim_start();
        if text == "---" {
            docs.push(BTreeMap::new());
            open.clear();
            items.clear();
            continue;
        }
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        let mut indent = line.len() - text.len();
        while open.last().is_some_and(|(i, _)| *i >= indent) {
            open.pop();
        }
        let mut path = open.last().map(|(_, p)| p.clone()).unwrap_or_default();
        let mut entry = text;
        if let Some(item) = text.strip_prefix("- ") {
            let n = items.entry(path.clone()).or_insert(0);
            path = format!("{path}[{n}]");
            *n += 1;
            open.push((indent, path.clone()));
            indent += 2;
            entry = item;
        }
        let doc = docs.last_mut().expect("one document at least");
        let unquote = |v: &str| v.trim().trim_matches('"').trim_matches('\'').to_owned();
        match entry.split_once(':') {
            Some((key, value)) if !key.contains(' ') || key.starts_with('"') => {
                let key = unquote(key);
                let path = if path.is_empty() {
                    key
                } else {
                    format!("{path}.{key}")
                };
                if value.trim().is_empty() {
                    open.push((indent, path));
                } else {
                    doc.insert(path, unquote(value));
                }
            }
            _ => {
                doc.insert(path, unquote(entry));
            }
        }
    }
    docs
}

/// The document of `kind` in `docs`.
fn kind<'a>(docs: &'a [BTreeMap<String, String>], kind: &str) -> &'a BTreeMap<String, String> {
    docs.iter()
        .find(|d| d.get("kind").is_some_and(|k| k == kind))
        .unwrap_or_else(|| panic!("the manifest has no {kind}"))
}

/// The value after `flag` in `args`.
fn flag<'a>(args: &'a [String], flag: &str) -> &'a str {
    let at = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("no {flag} in {args:?}"));
    args.get(at + 1)
        .map_or_else(|| panic!("{flag} has no value"), String::as_str)
}

/// The port of an address `host:port`.
fn port_of(address: &str) -> u16 {
    address
        .rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or_else(|| panic!("{address} has no port"))
}

/// A plain HTTP/1.1 GET: the status and the body.
pub(crate) fn get(address: &str, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(address).expect("the probe port answers");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n"
    )
    .expect("the request is sent");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("an answer");
    let status = answer
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map(|(_, b)| b.to_owned());
    (status, body.unwrap_or_default())
}

/// The `coach` example's binary beside this test binary (`target/<profile>/examples/coach`),
/// which `scripts/test-all` builds before the tests run. (`cargo test --all-targets` builds the
/// examples as test harnesses only, and a build from inside a test would race the doc tests or
/// wait on the outer cargo's lock.)
pub(crate) fn coach() -> PathBuf {
    example("coach")
}

/// The built example `name` beside this test binary (`target/<profile>/examples/<name>`), as
/// [`coach`].
pub(crate) fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let path = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>/deps/<test>")
        .join("examples")
        .join(name);
    assert!(
        path.exists(),
        "{} is missing: run `cargo build --example {name}` first (scripts/test-all does)",
        path.display()
    );
    path
}

#[test]
fn the_manifest_runs_the_images_command_and_probes_what_it_serves() {
    let dockerfile = read("deploy/Dockerfile");
    let yaml = read("deploy/kubernetes.yaml");
    let m = manifest(&yaml);

    // The image: built in one stage, run from a small one as a non-root user.
    assert!(dockerfile.matches("\nFROM ").count() >= 2, "multi-stage");
    assert!(
        dockerfile.contains("\nUSER nonroot:nonroot\n"),
        "runs as non-root"
    );
    assert_eq!(
        exec_form(&dockerfile, "ENTRYPOINT"),
        ["/usr/local/bin/coach"]
    );
    let cmd = exec_form(&dockerfile, "CMD");
    assert_eq!(m.args, cmd, "the manifest runs the image's own command");

    // The ports: what the command listens on, the image exposes and the manifest names.
    let voice = port_of(flag(&cmd, "--listen"));
    let probes = port_of(flag(&cmd, "--health-listen"));
    let exposed: Vec<u16> = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("EXPOSE "))
        .expect("EXPOSE")
        .split_whitespace()
        .map(|p| p.parse().expect("a port"))
        .collect();
    assert_eq!(exposed, [voice, probes]);
    assert_eq!(
        m.ports,
        [("voice".to_owned(), voice), ("probes".to_owned(), probes)]
    );
    assert_eq!(
        m.probes,
        [
            (
                "readinessProbe".to_owned(),
                "/readyz".to_owned(),
                "probes".to_owned()
            ),
            (
                "livenessProbe".to_owned(),
                "/healthz".to_owned(),
                "probes".to_owned()
            )
        ]
    );
    // The preStop sleep, the drain and the last calls' on_session_end (the default request
    // timeout, 10 s) all fit before the kubelet kills the process.
    let drain: u64 = flag(&cmd, "--drain-timeout").parse().expect("seconds");
    assert!(
        m.pre_stop_s > 0,
        "a preStop sleep lets the endpoints go first"
    );
    assert!(
        m.grace_s >= m.pre_stop_s + drain + 10 + 2,
        "{} s grace for a {} s preStop, a {drain} s drain and 10 s of on_session_end",
        m.grace_s,
        m.pre_stop_s
    );
    // The load is a share of the CPU the pod asked for (no CPU limit is set).
    let cpus: f64 = flag(&cmd, "--cpus").parse().expect("CPUs");
    assert_eq!(cpus, m.cpu_request, "--cpus is the pod's CPU request");

    // Run it as the manifest does, on free loopback ports.
    let args: Vec<String> = cmd
        .iter()
        .map(|a| {
            if a.starts_with("0.0.0.0:") {
                "127.0.0.1:0".to_owned()
            } else {
                a.clone()
            }
        })
        .collect();
    let (mut child, printed) = run_coach(&args, &[("GEMINI_API_KEY", "test-key")]);
    let next = |what: &str| printed_after(&printed, what);
    let probe_at = next("probes on http://");
    let probe_at = probe_at.split(':').take(2).collect::<Vec<_>>().join(":");
    let brain_at = next("serving a brain on ws://");
    for (_, path, _) in &m.probes {
        assert_eq!(get(&probe_at, path).0, 200, "{path}");
    }
    let (status, ready) = get(&probe_at, "/readyz");
    assert_eq!(status, 200);
    assert!(
        ready.contains("\"load\""),
        "readiness follows --max-load: {ready}"
    );
    // The voice port is the brain's, checking tokens against the production key (--production):
    // a call with no token is upgraded, then closed with 4000.
    let url = format!("ws://{brain_at}/?session_id=deploy-test");
    let stream = TcpStream::connect(&brain_at).expect("the voice port answers");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("a timeout");
    let (mut call, response) =
        tokio_tungstenite::tungstenite::client(url.as_str(), stream).expect("the upgrade");
    assert_eq!(response.status().as_u16(), 101);
    let closed = loop {
        match call.read() {
            Ok(tokio_tungstenite::tungstenite::Message::Close(frame)) => {
                break frame.map(|f| u16::from(f.code));
            }
            Ok(_) => {}
            Err(e) => panic!("the call was not closed: {e}"),
        }
    };
    assert_eq!(closed, Some(4000), "refused for its missing token");
    let (status, metrics) = get(&probe_at, "/metrics");
    assert_eq!(status, 200);
    // The autoscaler's calls per pod (the second test) are this gauge.
    assert!(metrics.contains(voqalize::metrics::CALLS_OPEN), "{metrics}");

    // SIGTERM: it drains (no call is running) and exits on its own.
    // SAFETY: kill takes a pid and a signal number; the child is ours and still running.
    let pid = i32::try_from(child.0.id()).expect("a pid");
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    next("shut down: ");
    let status = child.0.wait().expect("it exits");
    assert!(status.success(), "{status}");
}

/// Runs the built `coach` example with `args` and `env` set; its stdout lines arrive on the
/// receiver.
pub(crate) fn run_coach(
    args: &[String],
    env: &[(&str, &str)],
) -> (Running, mpsc::Receiver<String>) {
    let mut command = Command::new(coach());
    command
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    let mut child = Running(command.spawn().expect("the example starts"));
    let stdout = child.0.stdout.take().expect("its stdout");
    let (lines, printed) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    (child, printed)
}

/// What follows `prefix` on the next line the example printed that starts with it (60 s at most).
pub(crate) fn printed_after(printed: &mpsc::Receiver<String>, prefix: &str) -> String {
    loop {
        let line = printed
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the example never printed {prefix}"));
        if let Some(rest) = line.strip_prefix(prefix) {
            return rest.to_owned();
        }
    }
}

/// The example's process, killed if the test ends before it exits.
pub(crate) struct Running(pub(crate) std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_autoscaler_scales_before_a_pod_refuses_calls_and_the_budget_lets_a_node_drain() {
    let docs = documents(&read("deploy/kubernetes.yaml"));
    let cmd = exec_form(&read("deploy/Dockerfile"), "CMD");
    let deployment = kind(&docs, "Deployment");
    let hpa = kind(&docs, "HorizontalPodAutoscaler");
    let pdb = kind(&docs, "PodDisruptionBudget");
    let get = |doc: &BTreeMap<String, String>, path: &str| -> String {
        doc.get(path)
            .unwrap_or_else(|| panic!("no {path} in {doc:#?}"))
            .clone()
    };
    let number = |doc: &BTreeMap<String, String>, path: &str| -> f64 {
        get(doc, path)
            .parse()
            .unwrap_or_else(|e| panic!("{path}: {e}"))
    };

    // The autoscaler owns the Deployment's count.
    assert_eq!(get(hpa, "apiVersion"), "autoscaling/v2");
    assert_eq!(get(hpa, "spec.scaleTargetRef.kind"), "Deployment");
    assert_eq!(
        get(hpa, "spec.scaleTargetRef.name"),
        get(deployment, "metadata.name")
    );
    assert!(
        !deployment.contains_key("spec.replicas"),
        "an apply would reset the autoscaler's count"
    );
    let min = number(hpa, "spec.minReplicas");
    assert!(min >= 2.0 && number(hpa, "spec.maxReplicas") > min);

    // It scales on CPU below the share at which a pod refuses calls, and on calls in progress
    // below what a pod holds: new pods come before calls are refused.
    assert_eq!(get(hpa, "spec.metrics[0].resource.name"), "cpu");
    let cpu = number(hpa, "spec.metrics[0].resource.target.averageUtilization");
    let max_load: f64 = flag(&cmd, "--max-load").parse().expect("a share");
    assert!(
        cpu < max_load * 100.0,
        "{cpu} % against --max-load {max_load}"
    );
    assert_eq!(get(hpa, "spec.metrics[1].type"), "Pods");
    let calls = number(hpa, "spec.metrics[1].pods.target.averageValue");
    let max_sessions: f64 = flag(&cmd, "--max-sessions").parse().expect("a count");
    assert!(calls < max_sessions, "{calls} calls against {max_sessions}");
    // The calls are the brain's own gauge, served under that name by the adapter's rule.
    let metric = get(hpa, "spec.metrics[1].pods.metric.name");
    assert_eq!(metric, voqalize::metrics::CALLS_OPEN);
    let adapter = documents(&read("deploy/prometheus-adapter.yaml"));
    let rule = &adapter[0];
    assert!(get(rule, "rules.custom[0].seriesQuery").starts_with(&format!("{metric}{{")));
    assert_eq!(get(rule, "rules.custom[0].name.as"), metric);
    // Scaling down ends calls after a drain: slowly, one pod at a time.
    assert_eq!(get(hpa, "spec.behavior.scaleDown.policies[0].type"), "Pods");
    assert_eq!(
        number(hpa, "spec.behavior.scaleDown.policies[0].value"),
        1.0
    );

    // The budget selects the Deployment's pods and allows one eviction at any size the
    // autoscaler keeps: a node drain always goes on, one pod (and its drain) at a time.
    assert_eq!(get(pdb, "apiVersion"), "policy/v1");
    assert_eq!(
        get(pdb, "spec.selector.matchLabels.app"),
        get(deployment, "spec.template.metadata.labels.app")
    );
    assert_eq!(number(pdb, "spec.maxUnavailable"), 1.0);
}
