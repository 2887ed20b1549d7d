//! `MIRRORCL_TRACE`: a cluster program traced on 2 ranks, the ranks' files merged by
//! `mirrorcl trace`, and the merged trace checked as a user would read it.

use mirrorcl_tests::{run_cluster, target_dir};
use serde_json::Value;
use std::collections::HashMap;
use std::process::Command;

/// One send or receive of the trace: (rank, peer, tag, bytes) and its times (µs).
#[derive(Debug)]
struct Message {
    rank: u64,
    peer: u64,
    tag: u64,
    bytes: u64,
    posted: f64,
    done: f64,
}

fn messages(events: &[Value], name: &str) -> Vec<Message> {
    let mut ends: HashMap<(u64, String), f64> = HashMap::new();
    for e in events
        .iter()
        .filter(|e| e["ph"] == "e" && e["name"] == name)
    {
        let key = (e["pid"].as_u64().unwrap(), e["id"].as_str().unwrap().into());
        ends.insert(key, e["ts"].as_f64().unwrap());
    }
    events
        .iter()
        .filter(|e| e["ph"] == "b" && e["name"] == name)
        .map(|e| {
            let rank = e["pid"].as_u64().unwrap();
            let id: String = e["id"].as_str().unwrap().into();
            let arg = |k: &str| {
                e["args"][k]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{name} without {k}: {e}"))
            };
            Message {
                rank,
                peer: arg("peer"),
                tag: arg("tag"),
                bytes: arg("bytes"),
                posted: e["ts"].as_f64().unwrap(),
                done: *ends
                    .get(&(rank, id))
                    .unwrap_or_else(|| panic!("{name} never ended: {e}")),
            }
        })
        .collect()
}

#[test]
fn a_traced_cluster_run_merges_into_one_consistent_trace() {
    let dir = target_dir()
        .join("ctests")
        .join(format!("trace-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let dir_text = dir.display().to_string();
    let out = run_cluster(
        "cluster_alltoall",
        2,
        1,
        &[("MIRRORCL_TRACE", dir_text.as_str())],
    )
    .expect("run cluster_alltoall");
    assert!(out.passed(), "{}", out.report());
    for r in 0..2 {
        assert!(
            dir.join(format!("rank-{r}.json")).is_file(),
            "rank {r} wrote no trace\n{}",
            out.report()
        );
    }

    let merged_path = dir.join("merged.json");
    let merge = Command::new(target_dir().join("release").join("mirrorcl"))
        .arg("trace")
        .arg(&dir)
        .arg("-o")
        .arg(&merged_path)
        .output()
        .expect("run mirrorcl trace");
    assert!(
        merge.status.success(),
        "mirrorcl trace failed: {}",
        String::from_utf8_lossy(&merge.stderr)
    );
    let merged: Value =
        serde_json::from_str(&std::fs::read_to_string(&merged_path).expect("the merged trace"))
            .expect("the merged trace is JSON");
    let events = merged["traceEvents"].as_array().expect("traceEvents");

    // Both ranks, named, with named threads.
    let meta = |name: &str, pid: u64| -> Vec<String> {
        events
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == name && e["pid"] == pid)
            .map(|e| e["args"]["name"].as_str().unwrap_or("").to_string())
            .collect()
    };
    let mut issuer_threads = Vec::new();
    let mut application_threads = Vec::new();
    for r in 0..2u64 {
        let process = meta("process_name", r);
        assert_eq!(process.len(), 1, "rank {r}: {process:?}");
        assert!(
            process[0].starts_with(&format!("rank {r} (")),
            "{process:?}"
        );
        let threads = meta("thread_name", r);
        for t in ["application", "issuer, device", "MPI progress"] {
            assert!(
                threads.iter().any(|n| n.starts_with(t)),
                "rank {r}: no {t:?} thread in {threads:?}"
            );
        }
        let thread = |prefix: &str| {
            events
                .iter()
                .find(|e| {
                    e["ph"] == "M"
                        && e["pid"] == r
                        && e["name"] == "thread_name"
                        && e["args"]["name"]
                            .as_str()
                            .is_some_and(|n| n.starts_with(prefix))
                })
                .map(|e| e["tid"].clone())
                .unwrap()
        };
        issuer_threads.push(thread("issuer, device"));
        application_threads.push(thread("application"));
    }

    // No event before the start or of negative duration.
    for e in events.iter().filter(|e| e["ph"] != "M") {
        let ts = e["ts"].as_f64().unwrap_or(-1.0);
        assert!(ts >= 0.0, "{e}");
        if e["ph"] == "X" {
            assert!(e["dur"].as_f64().unwrap_or(-1.0) >= 0.0, "{e}");
        }
    }

    // The API calls the program makes, as many on each rank (replicas).
    let api = |r: u64, name: &str| {
        events
            .iter()
            .filter(|e| e["cat"] == "api" && e["pid"] == r && e["name"] == name)
            .count()
    };
    for name in [
        "clGetPlatformIDs",
        "clCreateContext",
        "clBuildProgram",
        "clCreateBuffer",
        "clEnqueueNDRangeKernel",
        "clEnqueueCopyBuffer",
        "clFinish",
        "clEnqueueReadBuffer",
    ] {
        assert!(api(0, name) > 0, "no {name} on rank 0");
        assert_eq!(api(0, name), api(1, name), "{name} counts differ");
    }
    // Scheduling on every rank, vendor commands on each owner's issuer thread (or on the
    // application thread that handed one over, where the issuer would have had to be
    // woken for it: `Issuer::send`).
    for r in 0..2u64 {
        let scheduled = events
            .iter()
            .filter(|e| e["cat"] == "schedule" && e["pid"] == r)
            .count();
        assert!(scheduled > 0, "rank {r} scheduled nothing");
        let issued = events
            .iter()
            .filter(|e| e["cat"] == "issue" && e["pid"] == r)
            .collect::<Vec<_>>();
        assert!(!issued.is_empty(), "rank {r} issued nothing");
        let (issuer, application) = (
            &issuer_threads[r as usize],
            &application_threads[r as usize],
        );
        assert!(
            issued
                .iter()
                .all(|e| e["tid"] == *issuer || (e["tid"] == *application && e["ph"] == "X")),
            "rank {r}: vendor commands off the issuer and application threads"
        );
        let waits = events
            .iter()
            .filter(|e| e["cat"] == "wait" && e["pid"] == r)
            .count();
        assert!(waits > 0, "rank {r}: no waits traced");
    }

    // Every send has its receive on the peer (peer, tag, bytes), which ends after the
    // send was posted on the common clock; and every receive its send.
    let sends = messages(events, "send");
    let receives = messages(events, "receive");
    assert!(
        !sends.is_empty(),
        "cross-rank copies but no sends in the trace"
    );
    assert_eq!(sends.len(), receives.len());
    for s in &sends {
        let r = receives
            .iter()
            .find(|r| r.rank == s.peer && r.peer == s.rank && r.tag == s.tag)
            .unwrap_or_else(|| panic!("no receive for {s:?}"));
        assert_eq!(r.bytes, s.bytes, "{s:?} received as {r:?}");
        assert!(
            r.done >= s.posted,
            "received before it was sent: {s:?} {r:?}"
        );
        assert!(s.done >= s.posted && r.done >= r.posted);
    }
    // The flow arrows pair up too.
    let flows = |ph: &str| {
        let mut ids: Vec<String> = events
            .iter()
            .filter(|e| e["ph"] == ph && e["cat"] == "message")
            .map(|e| e["id"].as_str().unwrap().to_string())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!(flows("s"), flows("f"));
    assert_eq!(flows("s").len(), sends.len());
    let _ = std::fs::remove_dir_all(&dir);
}
