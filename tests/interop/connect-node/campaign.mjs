// A Connect client nobody here wrote (@connectrpc/connect-node, HTTP/1.1)
// drives kubeleased: a campaign with Elected, Confirm and Resign (with the
// term's token; without it, Confirm, Resign and a resume are refused), a
// handoff to a second candidate, and a holder watch (current state first,
// then each change). Usage: node campaign.mjs GENERATED_PB_JS BASE_URL json|binary [CA_FILE]
// (CA_FILE: an https BASE_URL's certificate must chain to it).
import { readFileSync } from "node:fs";
import { createClient } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";

const [pbPath, baseUrl, format, caFile] = process.argv.slice(2);
const { LeaseService, LostReason } = await import(pbPath);

const transport = createConnectTransport({
  baseUrl,
  httpVersion: "1.1",
  useBinaryFormat: format === "binary",
  ...(caFile ? { nodeOptions: { ca: readFileSync(caFile) } } : {}),
});
const client = createClient(LeaseService, transport);

function check(cond, what) {
  if (!cond) {
    console.error(`FAIL (${format}): ${what}`);
    process.exit(1);
  }
  console.log(`ok (${format}): ${what}`);
}

// Resolves with the first stream event satisfying pred; fails after 10 s.
function nextEvent(iter, pred, what) {
  return Promise.race([
    (async () => {
      for (;;) {
        const r = await iter.next();
        if (r.done) throw new Error(`stream ended while waiting for ${what}`);
        if (pred(r.value)) return r.value;
      }
    })(),
    new Promise((_, rej) => setTimeout(() => rej(new Error(`timeout waiting for ${what}`)), 10000)),
  ]);
}

const ns = "default";
const name = `node-${format}`;
const durations = { leaseDurationSeconds: 15, renewDeadlineSeconds: 10, retryPeriodSeconds: 2 };

// The watch starts before anything exists: first event = current state.
const watchAbort = new AbortController();
const watch = client.watchHolder({ namespace: ns, name }, { signal: watchAbort.signal })[Symbol.asyncIterator]();
const first = await nextEvent(watch, () => true, "the first watch event");
check(first.exists === false && first.holder === "", "watch: current state first (no lease yet)");

const a = client.campaign({ namespace: ns, name, identity: "node-a", ...durations })[Symbol.asyncIterator]();
const electedA = await nextEvent(a, (e) => e.event.case === "elected", "Elected (a)");
const epochA = electedA.event.value.epoch;
const tokenA = electedA.event.value.termToken;
check(typeof epochA === "bigint" && epochA > 0n, `a elected at epoch ${epochA}`);
check(typeof tokenA === "string" && tokenA.length >= 22, "Elected carries a term token");

// Rule 8: the holder's identity and epoch are not enough.
async function refused(what, call) {
  try {
    await call();
    check(false, `${what} is refused`);
  } catch (err) {
    check(err.code === 7 /* PermissionDenied */, `${what}: ${err.rawMessage}`);
  }
}
await refused("Confirm without the token", () =>
  client.confirm({ namespace: ns, name, identity: "node-a", epoch: epochA }));
await refused("Resign without the token", () =>
  client.resign({ namespace: ns, name, identity: "node-a" }));
await refused("a resume without the token", async () => {
  for await (const e of client.campaign({ namespace: ns, name, identity: "node-a", ...durations, resumeEpoch: epochA })) {
    void e;
  }
});

const confirmSent = Date.now();
const conf = await client.confirm({ namespace: ns, name, identity: "node-a", epoch: epochA, termToken: tokenA });
check(conf.epoch === epochA && conf.validForMs > 0n, `Confirm: valid for ${conf.validForMs} ms (rtt ${Date.now() - confirmSent} ms)`);

const holder = await client.getHolder({ namespace: ns, name });
check(holder.holder === "node-a" && holder.epoch === epochA, "GetHolder: node-a");

const w2 = await nextEvent(watch, (e) => e.holder === "node-a", "watch: node-a holds");
check(w2.exists && w2.epoch === epochA, "watch: the change to node-a");

const b = client.campaign({ namespace: ns, name, identity: "node-b", ...durations })[Symbol.asyncIterator]();
const candB = await nextEvent(b, (e) => e.event.case === "candidate", "Candidate (b)");
check(candB.event.value.holder === "node-a", "b stands by behind node-a");

// A second live campaign with the same identity is refused.
const dup = client.campaign({ namespace: ns, name, identity: "node-a", ...durations })[Symbol.asyncIterator]();
const dupLost = await nextEvent(dup, (e) => e.event.case === "lost", "Lost (duplicate)");
check(dupLost.event.value.reason === LostReason.EXPIRED, "a duplicate campaign is refused");

const t0 = process.hrtime.bigint();
const res = await client.resign({ namespace: ns, name, identity: "node-a", termToken: tokenA });
check(res.released === true, "Resign released the lease");
const lostA = await nextEvent(a, (e) => e.event.case === "lost", "Lost (a)");
check(lostA.event.value.reason === LostReason.RESIGNED && lostA.event.value.epoch === epochA, "a: Lost RESIGNED");
const endA = await a.next();
check(endA.done === true, "a's stream ended cleanly after Lost");

const electedB = await nextEvent(b, (e) => e.event.case === "elected", "Elected (b)");
const handoffMs = Number(process.hrtime.bigint() - t0) / 1e6;
check(electedB.event.value.epoch === epochA + 1n, `b elected at epoch ${electedB.event.value.epoch}, ${handoffMs.toFixed(1)} ms after Resign was sent`);

const w3 = await nextEvent(watch, (e) => e.holder === "node-b", "watch: node-b holds");
check(w3.epoch === epochA + 1n, "watch: the change to node-b, in order");

await client.resign({ namespace: ns, name, identity: "node-b", termToken: electedB.event.value.termToken });
const lostB = await nextEvent(b, (e) => e.event.case === "lost", "Lost (b)");
check(lostB.event.value.reason === LostReason.RESIGNED, "b: Lost RESIGNED");

// Errors come back as ConnectError with the right code.
try {
  await client.confirm({ namespace: ns, name, identity: "node-a", epoch: epochA, termToken: tokenA });
  check(false, "Confirm of an ended term fails");
} catch (err) {
  check(err.code === 5 /* NotFound */ || err.code === 9 /* FailedPrecondition */, `Confirm of an ended term: ${err.rawMessage}`);
}
try {
  await client.getHolder({ namespace: "Not_A_Label", name });
  check(false, "an invalid namespace is refused");
} catch (err) {
  check(err.code === 3 /* InvalidArgument */ && err.rawMessage.includes("namespace"), `invalid namespace: ${err.rawMessage}`);
}

watchAbort.abort();
console.log(`done (${format})`);
process.exit(0);
