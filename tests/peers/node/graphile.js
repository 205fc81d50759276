'use strict'
// graphile-worker on the bench's PostgreSQL: the W2 drain as graphile-worker does it.
// The jobs of every agent are pre-loaded (`addJobs`, not timed) as one task with no
// named queue (a named queue runs its jobs one at a time), and one worker pool with
// `concurrency` = the bench's consumer count runs them; the task does nothing, so a
// job's cost is its fetch and its completion. graphile-worker has no claim-batch
// call; its batching is the pool's:
// - batch 1: no local queue (each job fetched by its own statement) and each job
//   completed by its own statement (`completeJobBatchDelay` -1), its defaults;
// - batch N > 1: `localQueue.size` N (the pool fetches and locks N jobs at once) and
//   `completeJobBatchDelay` 0 (completions in the same tick go in one statement).
// Timed from `run()` until the last job completed and the pool stopped (so the
// batched completions are written).
const { run, makeWorkerUtils, Logger } = require('graphile-worker')
const { settings, timed, report, version } = require('./common')

const quiet = new Logger(() => (level, message) => {
  if (level === 'error') console.error(`graphile-worker: ${message}`)
})

async function main () {
  const s = settings()
  const total = s.queues * s.per_queue
  const utils = await makeWorkerUtils({ connectionString: s.url, logger: quiet })
  try {
    await utils.migrate()
    const specs = []
    for (let q = 0; q < s.queues; q++) {
      for (let i = 0; i < s.per_queue; i++) {
        specs.push({ identifier: 'w2', payload: { ...s.payload, task_id: i } })
      }
    }
    for (let i = 0; i < specs.length; i += 1000) {
      await utils.addJobs(specs.slice(i, i + 1000))
    }
  } finally {
    await utils.release()
  }
  console.error(`graphile-worker: ${total} jobs loaded; draining, batch ${s.batch}`)
  const result = await timed(async () => {
    let done = 0
    let finished
    const all = new Promise((resolve) => { finished = resolve })
    const runner = await run({
      connectionString: s.url,
      concurrency: s.consumers,
      noHandleSignals: true,
      pollInterval: 1000,
      logger: quiet,
      taskList: {
        w2: async () => {
          if (++done === total) finished()
        }
      },
      preset: {
        worker: s.batch > 1
          ? { localQueue: { size: s.batch }, completeJobBatchDelay: 0 }
          : { completeJobBatchDelay: -1 }
      }
    })
    await all
    await runner.stop()
    return done
  })
  report('graphile-worker', version('graphile-worker'), result)
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
