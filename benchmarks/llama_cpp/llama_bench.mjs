// Times llama.cpp's CPU build on a GGUF file through node-llama-cpp: prefill and greedy decode.
//   node llama_bench.mjs --modules DIR --model FILE --vocab N [--threads 2] [--prompt-short 64]
//        [--prompt-long 512] [--gen-short 2] [--gen-long 66] [--reps 3] [--seed 11]
// DIR holds node_modules/ with node-llama-cpp (side_by_side.sh installs it there); the prompt is
// seeded ids below N - 1 (the last id is <|endoftext|> in make_gguf.py's vocabulary).
// Prefill: evaluate a prompt of --prompt-long tokens and one of --prompt-short, each from an
// empty KV; tokens/s = (long - short) / (time long - time short), so what every evaluation
// costs once (the call, the graph set-up, the first logits) cancels. Decode: a --prompt-short
// prompt, then greedy tokens until --gen-long have come, against --gen-short; tokens/s =
// (gen-long - gen-short) / the time difference. Each figure is the median over --reps, the
// long and short runs alternated, after one unmeasured warm-up of each.
// Logs go to stderr; the last stdout line is one JSON object with the figures.
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";
import path from "node:path";
import { openSync, readSync, closeSync, readFileSync } from "node:fs";

function parseArgs(argv) {
  const opts = {
    threads: 2, promptShort: 64, promptLong: 512, genShort: 2, genLong: 66, reps: 3, seed: 11,
  };
  const names = {
    "--modules": "modules", "--model": "model", "--threads": "threads",
    "--prompt-short": "promptShort", "--prompt-long": "promptLong", "--gen-short": "genShort",
    "--gen-long": "genLong", "--reps": "reps", "--seed": "seed", "--vocab": "vocab",
  };
  for (let i = 0; i < argv.length; i += 2) {
    const key = names[argv[i]];
    if (!key || i + 1 >= argv.length) throw new Error(`llama_bench: bad argument '${argv[i]}'`);
    opts[key] = key === "modules" || key === "model" ? argv[i + 1] : Number(argv[i + 1]);
  }
  if (!opts.modules || !opts.model || !(opts.vocab > 1))
    throw new Error("llama_bench: --modules, --model and --vocab are needed");
  if (!(opts.promptLong > opts.promptShort && opts.genLong > opts.genShort && opts.genShort >= 1))
    throw new Error("llama_bench: need prompt-long > prompt-short and gen-long > gen-short >= 1");
  return opts;
}

// mulberry32: a small seeded generator, so that the prompt is the same on every run.
function seededTokens(seed, count, vocab) {
  let a = seed >>> 0;
  const tokens = [];
  for (let i = 0; i < count; i++) {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    tokens.push(((t ^ (t >>> 14)) >>> 0) % (vocab - 1));
  }
  return tokens;
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
}

async function timePrefill(sequence, tokens) {
  await sequence.clearHistory();
  const t0 = performance.now();
  await sequence.evaluateWithoutGeneratingNewTokens(tokens);
  return (performance.now() - t0) / 1000;
}

// The first token comes from the prompt's logits, each further one from one decode step.
async function timeGenerate(sequence, prompt, count) {
  await sequence.clearHistory();
  const t0 = performance.now();
  let got = 0;
  for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
    void token;
    if (++got >= count) break;
  }
  return (performance.now() - t0) / 1000;
}

async function pairedMedians(reps, short, long) {
  await short();
  await long();
  const shorts = [], longs = [];
  for (let i = 0; i < reps; i++) {
    shorts.push(await short());
    longs.push(await long());
  }
  return { short: median(shorts), long: median(longs), shorts, longs };
}

// The llama.cpp commit node-llama-cpp ships its binaries from: the head of its source bundle.
function llamaCppCommit(packageDir) {
  try {
    const fd = openSync(path.join(packageDir, "llama", "gitRelease.bundle"), "r");
    const head = Buffer.alloc(256);
    readSync(fd, head, 0, head.length, 0);
    closeSync(fd);
    return /([0-9a-f]{40}) HEAD/.exec(head.toString("latin1"))?.[1] ?? "unknown";
  } catch {
    return "unknown";
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const packageDir = path.join(path.resolve(opts.modules), "node_modules", "node-llama-cpp");
  const entry = path.join(packageDir, "dist", "index.js");
  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(entry).href);
  const commit = llamaCppCommit(packageDir);
  const wrapper = JSON.parse(readFileSync(path.join(packageDir, "package.json"), "utf8")).version;
  // CPU only, the prebuilt binaries only: no GPU backend, no build from source, no download.
  const llama = await getLlama({
    gpu: false, build: "never", usePrebuiltBinaries: true, skipDownload: true,
    progressLogs: false, maxThreads: opts.threads, logLevel: LlamaLogLevel.warn,
  });
  const release = llama.llamaCppRelease;
  console.error(`llama.cpp: ${release.repo} ${release.release}, commit ${commit} ` +
    `(node-llama-cpp ${wrapper}, ${llama.buildType}), ` +
    `backend ${llama.gpu === false ? "CPU" : llama.gpu}`);
  console.error(`llama.cpp system info: ${llama.systemInfo}`);
  if (llama.gpu !== false) throw new Error(`llama_bench: expected the CPU build, got ${llama.gpu}`);

  const model = await llama.loadModel({ modelPath: opts.model, gpuLayers: 0 });
  const context = await model.createContext({
    contextSize: opts.promptLong + opts.genLong + 64,
    batchSize: opts.promptLong,
    sequences: 1,
    threads: { ideal: opts.threads, min: opts.threads },
  });
  const sequence = context.getSequence();
  const prompt = seededTokens(opts.seed, opts.promptLong, opts.vocab);
  const short = prompt.slice(0, opts.promptShort);
  console.error(`llama.cpp context: ${context.contextSize} tokens, batch ${context.batchSize}, ` +
    `threads ${context.currentThreads} (ideal ${context.idealThreads}), ` +
    `flash attention ${context.flashAttention}`);

  const pre = await pairedMedians(opts.reps, () => timePrefill(sequence, short),
    () => timePrefill(sequence, prompt));
  const dec = await pairedMedians(opts.reps, () => timeGenerate(sequence, short, opts.genShort),
    () => timeGenerate(sequence, short, opts.genLong));
  const result = {
    llama_cpp_release: `${release.repo} ${release.release}`,
    llama_cpp_commit: commit,
    node_llama_cpp: `${wrapper} ${llama.buildType}`,
    threads: context.currentThreads,
    system_info: llama.systemInfo,
    prefill_tok_s: (opts.promptLong - opts.promptShort) / (pre.long - pre.short),
    prefill_plain_tok_s: opts.promptLong / pre.long,
    decode_tok_s: (opts.genLong - opts.genShort) / (dec.long - dec.short),
    prefill_s: { short: pre.shorts, long: pre.longs },
    generate_s: { short: dec.shorts, long: dec.longs },
    settings: opts,
  };
  await context.dispose();
  await model.dispose();
  await llama.dispose();
  console.log(JSON.stringify(result));
}

main().catch((e) => {
  console.error(e instanceof Error ? e.message : e);
  process.exit(1);
});
