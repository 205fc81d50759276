//! The jobs room: bulk jobs whose instance stopped beating are marked
//! interrupted (a shared database), and the console is told. (The runner of a job
//! is the application's: `app::jobs`.)

/// The rescue pass: bulk jobs whose instance stopped beating are marked
/// interrupted (a shared database), and the console is told.
pub(super) async fn rescue(w: &super::Workers, now: i64, report: &mut super::TickReport) {
    let state = &w.state;
    let orphaned = w
        .task("job_rescue", report, state.store.jobs_orphaned(now))
        .await;
    for (tenant, job) in &orphaned {
        tracing::warn!(
            job_id = job.job_id,
            done = job.done,
            "a bulk job's instance stopped without ending it; marked interrupted"
        );
        state.publish_job(*tenant, job);
    }
    report.jobs_interrupted = orphaned.len() as u64;
}
