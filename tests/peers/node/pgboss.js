'use strict'
// pg-boss on the bench's PostgreSQL: the W2 drain as pg-boss does it. Queue `i`
// (a pg-boss queue, created with the default "standard" policy) stands for agent
// `i`'s inbox; a claim is `boss.fetch(queue, { batchSize })` (one statement, FOR
// UPDATE SKIP LOCKED, moves the jobs to "active"), an ack is `boss.complete(queue,
// ids)` (one statement for the whole claim). Pre-loading (`boss.insert`, one call
// per queue) is not timed. pg-boss's own maintenance (supervise) runs as deployed.
const PgBoss = require('pg-boss')
const { settings, drain, timed, report, version } = require('./common')

async function main () {
  const s = settings()
  const boss = new PgBoss({ connectionString: s.url, max: s.consumers + 2, schedule: false })
  boss.on('error', (e) => console.error('pg-boss:', e))
  await boss.start()
  const name = (i) => `w2_${String(i).padStart(3, '0')}`
  for (let q = 0; q < s.queues; q++) {
    await boss.createQueue(name(q))
    const jobs = Array.from({ length: s.per_queue }, (_, i) => ({
      name: name(q),
      data: { ...s.payload, task_id: i }
    }))
    await boss.insert(jobs)
  }
  console.error(`pg-boss: ${s.queues * s.per_queue} jobs loaded; draining, batch ${s.batch}`)
  const result = await timed(() => drain(s.queues, s.consumers, s.batch,
    async (q, batch) => boss.fetch(name(q), { batchSize: batch }),
    async (q, jobs) => {
      const done = await boss.complete(name(q), jobs.map((j) => j.id))
      if (done.affected !== jobs.length) {
        throw new Error(`complete affected ${done.affected} of ${jobs.length} jobs`)
      }
    }))
  await boss.stop({ graceful: false, wait: true })
  report('pg-boss', version('pg-boss'), result)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
