/**
 * Long-conversation recall on LoCoMo (Maharana et al., ACL 2024): each turn of a conversation
 * stored as a memory (`Speaker: text`, as a new user would), each question of categories 1–4
 * recalled, and counted found at k when one of its evidence turns is in the top k. No LLM.
 *
 * The conversations are read from CAIRN_LOCOMO_DIR (default ../shared/data/locomo-dev beside
 * the repository): benchmark data for measuring only (CC BY-NC 4.0), never committed here nor
 * shipped in a package. Without it the suite says so and skips.
 */
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createMemory, type RecallMode } from '@cairn/memory';
import { createSqliteStore } from '@cairn/store-sqlite';
import { benchEmbedders } from '../embedders.js';
import { median, type Suite } from '../harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const DATA =
  process.env.CAIRN_LOCOMO_DIR ??
  resolve(here, '..', '..', '..', '..', 'shared', 'data', 'locomo-dev');
const MODES: RecallMode[] = ['vector', 'keyword', 'hybrid'];
const KS = [1, 5, 10] as const;

interface Turn {
  speaker: string;
  dia_id: string;
  text: string;
  /** When its session took place (ms since the epoch, UTC). */
  at: number;
}

const MONTHS =
  'january february march april may june july august september october november december'.split(
    ' ',
  );

/** A session's date as LoCoMo writes it: `1:56 pm on 8 May, 2023`. */
function sessionTime(text: string): number {
  const m = /^(\d+):(\d+) (am|pm) on (\d+) (\w+),? (\d+)$/i.exec(text.trim());
  const month = m ? MONTHS.indexOf(m[5]!.toLowerCase()) : -1;
  if (!m || month < 0) throw new Error(`LoCoMo: a session date that does not parse: ${text}`);
  const hour = (Number(m[1]) % 12) + (m[3]!.toLowerCase() === 'pm' ? 12 : 0);
  return Date.UTC(Number(m[6]), month, Number(m[4]), hour, Number(m[2]));
}
interface Question {
  question: string;
  evidence: string[];
  category: number;
}
interface Conversation {
  name: string;
  turns: Turn[];
  questions: Question[];
}

function load(): Conversation[] {
  return readdirSync(DATA)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => {
      const raw = JSON.parse(readFileSync(join(DATA, f), 'utf8')) as Record<string, unknown>;
      const c = (raw.conversation ?? raw) as Record<string, unknown>;
      const sessions = Object.keys(c)
        .filter((k) => /^session_\d+$/.test(k))
        .sort((a, b) => Number(a.slice(8)) - Number(b.slice(8)));
      return {
        name: f.replace(/\.json$/, ''),
        turns: sessions.flatMap((s) => {
          const at = sessionTime(c[`${s}_date_time`] as string);
          return (c[s] as Omit<Turn, 'at'>[]).map((t) => ({ ...t, at }));
        }),
        // Category 5 is adversarial: its answer is not in the conversation.
        questions: (raw.qa as Question[]).filter(
          (q) => q.category >= 1 && q.category <= 4 && q.evidence.length > 0,
        ),
      };
    });
}

interface Row {
  embedder: string;
  mode: RecallMode;
  found: Record<(typeof KS)[number], number>;
  questions: number;
  latencies: number[];
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? 0;
};

const suite: Suite = {
  id: 'locomo',
  title: 'Long-conversation recall: LoCoMo',
  async run(log) {
    if (!existsSync(DATA))
      return { markdown: `_Skipped: no LoCoMo conversations at ${DATA} (CAIRN_LOCOMO_DIR)._` };
    const conversations = load();
    const rows: Row[] = [];
    for (const e of await benchEmbedders(log)) {
      const byMode = new Map<RecallMode, Row>(
        MODES.map((mode) => [
          mode,
          { embedder: e.name, mode, found: { 1: 0, 5: 0, 10: 0 }, questions: 0, latencies: [] },
        ]),
      );
      for (const conv of conversations) {
        const dir = mkdtempSync(join(tmpdir(), 'cairn-bench-locomo-'));
        const store = createSqliteStore({ path: join(dir, 'memory.db') });
        try {
          const memory = createMemory({ store, embedder: e.embedder, agentId: 'bench' });
          const t0 = performance.now();
          const stored = await memory.rememberMany(
            conv.turns.map((t) => ({
              text: `${t.speaker}: ${t.text}`,
              validFrom: t.at,
              metadata: { dia: t.dia_id },
            })),
            { allowDuplicate: true },
          );
          const diaOf = new Map(stored.map((m) => [m.id, m.metadata.dia as string]));
          log(
            `${e.name}, conversation ${conv.name}: ${stored.length} turns stored in ${((performance.now() - t0) / 1000).toFixed(1)} s`,
          );
          for (const mode of MODES) {
            const row = byMode.get(mode)!;
            for (const q of conv.questions) {
              const start = performance.now();
              const hits = await memory.recall(q.question, { mode, limit: 10 });
              row.latencies.push(performance.now() - start);
              const ranks = hits.map((h) => diaOf.get(h.memory.id));
              const first = ranks.findIndex((d) => d !== undefined && q.evidence.includes(d));
              for (const k of KS) if (first >= 0 && first < k) row.found[k]++;
              row.questions++;
            }
          }
        } finally {
          await store.close();
          rmSync(dir, { recursive: true, force: true });
        }
      }
      rows.push(...byMode.values());
      e.dispose?.();
    }
    const questions = rows[0]?.questions ?? 0;
    const turns = conversations.reduce((n, c) => n + c.turns.length, 0);
    const table = [
      '| embedder | mode | recall@1 | recall@5 | recall@10 | p50 ms | p95 ms |',
      '| --- | --- | ---: | ---: | ---: | ---: | ---: |',
      ...rows.map(
        (r) =>
          `| ${r.embedder} | ${r.mode}${r.mode === 'hybrid' ? ' (default)' : ''} | ${KS.map((k) => (r.found[k] / r.questions).toFixed(3)).join(' | ')} | ${median(r.latencies).toFixed(2)} | ${pct(r.latencies, 95).toFixed(2)} |`,
      ),
    ];
    return {
      markdown: [
        `${conversations.length} LoCoMo conversations (${conversations.map((c) => c.name).join(', ')}; ${turns} turns, ${questions} questions of categories 1–4), each turn`,
        "stored as one memory `Speaker: text` (valid from its session's date) with `rememberMany` on a fresh SQLite store, each",
        'question recalled with `recall(question, { mode, limit: 10 })`; found at k when one of',
        "its evidence turns is in the top k. The benchmark's data is read from outside the",
        'repository and never committed.',
        '',
        ...table,
      ].join('\n'),
    };
  },
};

export default suite;
