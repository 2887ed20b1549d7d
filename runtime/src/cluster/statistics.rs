//! `MIRRORCL_STATS`: every rank's counters (`observe::stats`) gathered at exit and
//! reported by rank 0.

use crate::cluster::wire::Statistics;
use crate::observe::stats::{table, Figures, Report, COUNTERS};

/// At exit (before MPI is finalised): gathers every rank's figures and reports them as
/// `MIRRORCL_STATS` asks. A collective: every rank exits through here.
///
/// Figures that do not decode (a rank still in another collective, another build) are
/// reported in one line and the statistics left out, but the job is not ended: this runs
/// in an `atexit` handler, where aborting would replace the program's exit status (and
/// `MPI_Abort` exits from within `exit`). A rank still inside another collective ends
/// the job itself, on the same gathered bytes.
pub fn report_at_exit(target: &str) {
    let node = crate::cluster::node::node();
    let mine = COUNTERS.snapshot();
    let ranks: Vec<Figures> = if node.can_communicate() {
        match node.try_exchange(&Statistics(mine.values())) {
            Ok(all) => all.iter().map(|s| Figures::from_values(&s.0)).collect(),
            Err(e) => {
                crate::diag!(
                    "MirrorCL: rank {}: {e}; statistics not reported.",
                    node.rank
                );
                return;
            }
        }
    } else {
        vec![mine]
    };
    if node.rank != 0 {
        return;
    }
    let mut total = Figures::default();
    for f in &ranks {
        total.add(f);
    }
    let report = Report { ranks, total };
    if matches!(target, "1" | "true" | "yes") {
        crate::observe::diag::diag(&table(&report));
    } else {
        let text = serde_json::to_string_pretty(&report).unwrap_or_default();
        if let Err(e) = std::fs::write(target, text) {
            crate::diag!("MirrorCL: cannot write statistics to {target}: {e}");
        }
    }
}
