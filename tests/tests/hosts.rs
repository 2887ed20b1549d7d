//! Several hosts on one machine: each rank's host identity comes from `MIRRORCL_HOST`,
//! set per rank by a wrapper, and MPI is kept off its shared-memory path between ranks
//! (Open MPI: `btl tcp,self`, `pml ob1`, so the bytes cross TCP as between real hosts;
//! MPICH: every rank as if on another node, through UCX. MPICH 4.0.2's UCX over TCP
//! sometimes hangs in `MPI_Finalize` on this machine, a plain MPI program too). Each "host"
//! shows two PoCL CPU devices, split among its ranks like a node's GPUs
//! (`MIRRORCL_CPU_DEVICES=split`).

use mirrorcl_tests::{check_cluster_wrapped, ClusterOutput};

/// Rank r is on "host<r / 2>"; a rank listed in `deviceless` is on "login" and has no
/// vendor platform at all (its ICD directory does not exist), like a login node.
fn wrapper(deviceless: Option<u32>) -> Vec<String> {
    let rank = mirrorcl_tests::mpi().rank_var();
    let login = deviceless.map_or(String::new(), |r| {
        format!(
            "if [ \"${rank}\" = {r} ]; then \
             export MIRRORCL_HOST=login MIRRORCL_VENDORS=/nonexistent/vendors; fi; "
        )
    });
    vec![
        "sh".into(),
        "-c".into(),
        format!("export MIRRORCL_HOST=host$(({rank} / 2)); {login}exec \"$0\""),
    ]
}

fn run_on_hosts(prog: &str, ranks: u32, wrapper: &[String], expect_devices: u32) -> ClusterOutput {
    let wrapper: Vec<&str> = wrapper.iter().map(String::as_str).collect();
    let expect = expect_devices.to_string();
    // One real host when no wrapper names hosts: MPICH then groups its ranks as usual.
    let nolocal = if wrapper.is_empty() { "0" } else { "1" };
    let env = [
        ("MIRRORCL_CPU_DEVICES", "split"),
        ("MIRRORCL_SHOW_DEVICES", "1"),
        ("CTEST_EXPECT_DEVICES", expect.as_str()),
        ("OMPI_MCA_btl", "tcp,self"),
        ("OMPI_MCA_pml", "ob1"),
        ("MPIR_CVAR_NOLOCAL", nolocal),
    ];
    check_cluster_wrapped(prog, &wrapper, ranks, 2, &env)
}

/// Rank 0's device table: (owner rank, host) per device.
fn device_owners(out: &ClusterOutput) -> Vec<(u32, String)> {
    let table = &out.outputs[0].1;
    table
        .lines()
        .skip_while(|l| !l.starts_with("MirrorCL: "))
        .skip(2)
        .map_while(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let rank = f.get(1)?.parse().ok()?;
            Some((rank, f.get(2)?.to_string()))
        })
        .collect()
}

/// Two hosts of two ranks: each host's two devices are split between its ranks (four in
/// all, one per rank), where one real host would have given its two devices to ranks 0
/// and 1 only; the cluster programs pass on every rank with their bytes over TCP.
#[test]
fn two_hosts_of_two_ranks_over_tcp() {
    let hosts = wrapper(None);
    let out = run_on_hosts("cluster_vecadd", 4, &hosts, 4);
    let expected: Vec<(u32, String)> = (0..4).map(|r| (r, format!("host{}", r / 2))).collect();
    assert_eq!(device_owners(&out), expected, "{}", out.report());

    let one_host = run_on_hosts("cluster_vecadd", 4, &[], 2);
    let owners: Vec<u32> = device_owners(&one_host).iter().map(|d| d.0).collect();
    assert_eq!(owners, [0, 1], "{}", one_host.report());

    for prog in [
        "cluster_stencil",
        "cluster_alltoall",
        "cluster_attach",
        "cluster_turns",
        "cluster_images",
        "buffers",
    ] {
        run_on_hosts(prog, 4, &hosts, 4);
    }
}

/// A rank with no vendor platform at all (a login node) is a member of the cluster: it
/// runs the whole program, owns nothing, and gets every result the others get.
#[test]
fn a_rank_without_devices_runs_the_program() {
    let hosts = wrapper(Some(4));
    for prog in ["cluster_vecadd", "cluster_alltoall", "cluster_stencil"] {
        let out = run_on_hosts(prog, 5, &hosts, 4);
        let owners = device_owners(&out);
        assert_eq!(owners.len(), 4, "{}", out.report());
        assert!(owners.iter().all(|(r, _)| *r != 4), "{}", out.report());
    }
}
