// Drives `switchboard mcp` with the official TypeScript MCP SDK (npm
// @modelcontextprotocol/sdk): lists the tools and compiles every input schema with
// Ajv, then alice hands bob a task and bob hands the result back, bob told by a
// `notifications/resources/updated` after `resources/subscribe`, claiming and acking
// through tools. Run by crates/cli/tests/mcp.rs with the environment scenarios.py
// documents (SB_BIN, SB_URL, SB_<AGENT>_TOKEN, SB_<AGENT>_STATE, SB_CONFIG, SB_ARGS).
// Exit status 0 is a pass.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import {
  LATEST_PROTOCOL_VERSION,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";
import Ajv2020 from "ajv/dist/2020.js";

const INBOX = "switchboard://inbox";
const TIMEOUT_MS = 20000;

function check(condition, why) {
  if (!condition) throw new Error(why);
}

async function connect(agent) {
  const env = process.env;
  const transport = new StdioClientTransport({
    command: env.SB_BIN,
    args: ["mcp", "--name", agent, ...(env.SB_ARGS || "").split(" ").filter(Boolean)],
    env: {
      SWITCHBOARD_SERVER: env.SB_URL,
      SWITCHBOARD_TOKEN: env[`SB_${agent.toUpperCase()}_TOKEN`],
      SWITCHBOARD_STATE: env[`SB_${agent.toUpperCase()}_STATE`],
      XDG_CONFIG_HOME: env.SB_CONFIG,
      SWITCHBOARD_LOG: "warn",
      PATH: env.PATH || "",
    },
    stderr: "inherit",
  });
  const client = new Client({ name: `ts-${agent}`, version: "1.0.0" });
  await client.connect(transport);
  return client;
}

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  const text = result.content.map((b) => b.text || "").join(" ");
  check(!result.isError, `${name} failed: ${text}`);
  return { data: result.structuredContent, text };
}

function notifications(client) {
  let resolveNext = null;
  let seen = 0;
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    if (n.params.uri === INBOX) {
      seen += 1;
      if (resolveNext) resolveNext();
    }
  });
  return {
    next(what) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`no inbox notification for ${what} within ${TIMEOUT_MS} ms`)),
          TIMEOUT_MS,
        );
        resolveNext = () => {
          clearTimeout(timer);
          resolveNext = null;
          resolve();
        };
      });
    },
    get seen() {
      return seen;
    },
  };
}

async function main() {
  const alice = await connect("alice");
  const bob = await connect("bob");
  try {
    check(
      bob.getServerCapabilities()?.resources?.subscribe === true,
      "the server does not offer resource subscriptions",
    );
    const { tools } = await alice.listTools();
    check(tools.length === 13, `tools: ${tools.map((t) => t.name)}`);
    const ajv = new Ajv2020({ strict: false });
    for (const tool of tools) {
      check(tool.description && tool.description.length > 30, `${tool.name}: no description`);
      const validate = ajv.compile(tool.inputSchema);
      if (tool.name === "claim_work") {
        check(validate({ limit: 3 }), `claim_work refuses good arguments: ${ajv.errorsText(validate.errors)}`);
        check(!validate({ limit: 11 }), "claim_work takes limit 11");
      }
      if (tool.name === "complete_work") {
        check(!validate({}), "complete_work takes no event_id");
      }
    }

    const bobUpdates = notifications(bob);
    const aliceUpdates = notifications(alice);
    await bob.subscribeResource({ uri: INBOX });
    await alice.subscribeResource({ uri: INBOX });
    await new Promise((r) => setTimeout(r, 500));

    const told = bobUpdates.next("alice's task");
    const sent = await call(alice, "send_message", { to: "bob", payload: { subject: "translate", text: "page 3" } });
    check(sent.data.state === "sent", `not sent: ${sent.text}`);
    await told;

    const inbox = await bob.readResource({ uri: INBOX });
    check(JSON.parse(inbox.contents[0].text).pending === 1, inbox.contents[0].text);
    const claimed = await call(bob, "claim_work", {});
    const event = claimed.data.events[0];
    check(
      JSON.stringify(event.content_from_another_agent) === JSON.stringify({ subject: "translate", text: "page 3" }),
      JSON.stringify(event),
    );
    check(event.sender === 'agent "alice"', event.sender);
    check(claimed.text.includes("not instructions"), claimed.text);
    await call(bob, "complete_work", { event_id: event.event_id });

    const answered = aliceUpdates.next("bob's answer");
    await call(bob, "send_message", { to: "alice", payload: { text: "translated" } });
    await answered;
    const back = await call(alice, "claim_work", {});
    check(back.data.events[0].content_from_another_agent.text === "translated", back.text);
    await call(alice, "complete_work", { event_id: back.data.events[0].event_id });

    const bad = await alice.callTool({ name: "claim_work", arguments: { limit: "all" } });
    check(bad.isError && bad.structuredContent.error.code === "invalid_arguments", JSON.stringify(bad));
    console.log(`ok: typescript SDK (latest ${LATEST_PROTOCOL_VERSION}), ${tools.length} tools, handoff`);
  } finally {
    await alice.close();
    await bob.close();
  }
}

main().catch((e) => {
  console.error(`FAILED typescript handoff: ${e.stack || e}`);
  process.exit(1);
});
