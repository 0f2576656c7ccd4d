#!/usr/bin/env node
import { isCairnError } from '@cairn/core';
import { startInspector } from '@cairn/inspector';
import { createMemoryStore } from '@cairn/store';
import { type DemoOptions, parseDemoArgs, USAGE } from './args.js';
import { chatClientFromEnv } from './chat-client.js';
import { chooseDemoEmbedder } from './demo-embedder.js';
import { openDemoStore, redactUrl } from './open-store.js';
import { Research } from './research-state.js';
import { runScenario, viewerFor } from './scenario.js';
import { Terminal } from './terminal.js';

/**
 * `pnpm demo` — runs the research-assistant scenario on SQLite (or PostgreSQL with
 * `--db postgres://...`); `pnpm demo serve` — starts the inspector. Expected errors
 * print one line and exit 1; a stack trace only appears with CAIRN_DEBUG=1.
 */
async function main(argv: string[]): Promise<void> {
  const options = parseDemoArgs(argv, process.env.INIT_CWD ?? process.cwd());
  if (options.command === 'help') {
    console.log(USAGE);
    return;
  }
  const term = new Terminal();
  const chat = chatClientFromEnv(process.env);
  if (options.command === 'serve') return serve(options, term);

  const store = await openDemoStore(options);
  try {
    const { embedder, why } = await chooseDemoEmbedder(store, process.env);
    term.line(term.bold('Cairn demo · a research assistant with durable, branchable state'));
    term.line(
      term.dim(
        `  store: ${describeDb(options)}${chat ? ` · chat: ${chat.model} at ${chat.baseUrl}` : ' · no chat endpoint: the agents are deterministic code'}`,
      ),
    );
    term.line(term.dim(`  memory embedder: ${embedder.id} (${why})`));
    await runScenario({ store, question: options.question, term, chat, embedder });
    term.line();
    term.line(
      `  Inspect it: ${term.bold(`pnpm demo serve${options.dbKind === 'postgres' || options.db !== defaultDb() ? ` --db ${options.dbKind === 'postgres' ? redactUrl(options.db) : options.db}` : ''}`)} → http://127.0.0.1:${options.port}`,
    );
  } finally {
    await store.close();
  }
}

function defaultDb(): string {
  return parseDemoArgs([], process.env.INIT_CWD ?? process.cwd()).db;
}

function describeDb(options: DemoOptions): string {
  return options.dbKind === 'postgres'
    ? `PostgreSQL ${redactUrl(options.db)}`
    : `SQLite ${options.db}`;
}

async function serve(options: DemoOptions, term: Terminal): Promise<void> {
  // A port in use must fail before --fresh deletes anything.
  await assertPortFree(options.port);
  const store = await openDemoStore(options);
  let closing = false;
  try {
    // Take the port before writing anything: a port in use must not leave a half-run scenario.
    const { embedder, why } = await chooseDemoEmbedder(store, process.env);
    term.line(term.dim(`  memory embedder: ${embedder.id} (${why})`));
    const inspector = await startInspector({
      store,
      port: options.port,
      allowWrites: options.allowWrites,
      embedder,
      schema: Research,
      viewerFor,
      title: `research-assistant demo · ${describeDb(options)}`,
    });
    const { items } = await store.listThreads({ limit: 1 });
    if (items.length === 0 || options.fresh) {
      term.line(term.dim('  the database holds no conversation yet: running the scenario first'));
      await runScenario({
        store,
        question: options.question,
        term,
        chat: chatClientFromEnv(process.env),
        embedder,
      });
    }
    term.line();
    term.line(
      `${term.bold('Cairn inspector')} listening on ${term.bold(term.cyan(inspector.url))}  ${term.dim('(Ctrl-C stops it)')}`,
    );
    await new Promise<void>((resolve) => {
      const stop = () => {
        if (closing) return;
        closing = true;
        inspector.close().finally(resolve);
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
  } finally {
    await store.close();
  }
}

async function assertPortFree(port: number): Promise<void> {
  if (port === 0) return;
  const nothing = createMemoryStore();
  const probe = await startInspector({ store: nothing, port });
  await probe.close();
  await nothing.close();
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const message = isCairnError(error)
    ? error.message
    : error instanceof Error
      ? error.message
      : String(error);
  process.stderr.write(`cairn-demo: ${message.split('\n')[0]}\n`);
  if (process.env.CAIRN_DEBUG && error instanceof Error) process.stderr.write(`${error.stack}\n`);
  process.exitCode = 1;
});
