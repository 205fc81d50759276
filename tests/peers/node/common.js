'use strict'
// Shared by the bench's Node peers: the settings the Rust bench passes (one JSON
// argument), the consumer loop of its W2 drain (tests/src/bin/bench/drain.rs), and
// the one JSON result line it reads from stdout. Progress goes to stderr.

function settings () {
  const arg = process.argv[2]
  if (!arg) {
    throw new Error('usage: node <peer>.js \'{"url":…,"queues":…,"per_queue":…,"consumers":…,"batch":…,"payload":{…}}\'')
  }
  return JSON.parse(arg)
}

// `consumers` tasks each claim up to `batch` messages from one queue, ack them, and
// claim again; when a claim comes back empty the task moves to the next queue
// nobody has taken yet. Consumer `c` starts on queue `c mod queues`. As drain.rs.
async function drain (queues, consumers, batch, claim, ack) {
  let next = Math.min(consumers, queues)
  const consumer = async (c) => {
    let queue = c % queues
    let done = 0
    for (;;) {
      const claimed = await claim(queue, batch)
      if (claimed.length === 0) {
        queue = next++
        if (queue >= queues) return done
        continue
      }
      done += claimed.length
      await ack(queue, claimed)
    }
  }
  const counts = await Promise.all(Array.from({ length: consumers }, (_, c) => consumer(c)))
  return counts.reduce((a, b) => a + b, 0)
}

// Wall time and this process's CPU (user + system) around `f`.
async function timed (f) {
  const cpu = process.cpuUsage()
  const start = process.hrtime.bigint()
  const messages = await f()
  const seconds = Number(process.hrtime.bigint() - start) / 1e9
  const used = process.cpuUsage(cpu)
  return { messages, seconds, cpu_seconds: (used.user + used.system) / 1e6 }
}

function report (peer, version, result) {
  process.stdout.write(JSON.stringify({ peer, version, ...result }) + '\n')
}

function version (pkg) {
  return require(`${pkg}/package.json`).version
}

module.exports = { settings, drain, timed, report, version }
