import { describe, expect, it } from 'vitest';
import { keywordSearcher, loadCorpus } from '../src/corpus.js';
import {
  composeReply,
  extractFindings,
  type Finding,
  formHypothesis,
  mergeHits,
  planTasks,
  recordDiscoveries,
  reflect,
  titleFor,
} from '../src/research-agent.js';
import { terms } from '../src/text.js';

const docs = loadCorpus();
const byId = new Map(docs.map((d) => [d.id, d]));
const QUESTION = 'How do cover crops change soil nitrogen through microbes and nitrogen fixation?';

async function iterate(objective: string, explored: string[] = []) {
  const search = keywordSearcher(docs);
  const tasks = planTasks(objective, 1);
  const findings: Finding[] = [];
  for (const task of tasks) {
    findings.push(...extractFindings(task, mergeHits([await search(task.query, 6)], byId, 6)));
  }
  const hypothesis = formHypothesis(objective, findings);
  const reflection = reflect({
    question: QUESTION,
    objective,
    tasks,
    findings,
    explored,
    passagesSearched: docs.length,
  });
  const discoveries = recordDiscoveries({
    objective,
    iteration: 1,
    insights: reflection.keyInsights,
    findings,
  });
  return { tasks, findings, hypothesis, reflection, discoveries };
}

describe('the corpus', () => {
  it('ships 30-60 titled documents on three topics', () => {
    expect(docs.length).toBeGreaterThanOrEqual(30);
    expect(docs.length).toBeLessThanOrEqual(60);
    expect(new Set(docs.map((d) => d.topic))).toEqual(new Set(['soil', 'nfix', 'cover']));
    for (const d of docs) {
      expect(d.title.length).toBeGreaterThan(5);
      expect(d.text.split(/\n\s*\n/).length).toBeGreaterThanOrEqual(2);
    }
  });

  it('finds documents by keyword, best first', async () => {
    const hits = await keywordSearcher(docs)('nodule leghaemoglobin', 3);
    expect(hits[0]?.docId).toBe('nfix-02-rhizobia-nodulation');
  });
});

describe('the research agent', () => {
  it('plans one literature task per facet, each searching the objective terms', () => {
    const tasks = planTasks(QUESTION, 2);
    expect(tasks.map((t) => t.id)).toEqual([
      'i2-mechanism',
      'i2-evidence',
      'i2-management',
      'i2-tradeoffs',
    ]);
    for (const t of tasks) expect(t.core).toEqual(['cover', 'crop', 'soil', 'nitrogen', 'microbe']);
  });

  it('extracts only sentences that contain the task terms, quoting their documents', async () => {
    const { findings } = await iterate(QUESTION);
    expect(findings.length).toBeGreaterThan(8);
    for (const f of findings) {
      const words = new Set(terms(f.quote));
      expect(f.matched.every((t) => words.has(t))).toBe(true);
      expect(byId.get(f.docId)?.text.replace(/\s+/g, ' ')).toContain(f.quote);
    }
  });

  it('is deterministic: the same question gives the same hypothesis, reflection and discoveries', async () => {
    const a = await iterate(QUESTION);
    const b = await iterate(QUESTION);
    expect(b.hypothesis).toBe(a.hypothesis);
    expect(b.reflection).toEqual(a.reflection);
    expect(b.discoveries).toEqual(a.discoveries);
  });

  it('reflects: three insights, a methodology, a new next objective and a short title', async () => {
    const { reflection } = await iterate(QUESTION);
    expect(reflection.keyInsights).toHaveLength(3);
    expect(reflection.methodology).toMatch(/4 literature tasks in parallel/);
    expect(reflection.nextObjective).not.toBe(QUESTION);
    expect(reflection.alternatives.length).toBeGreaterThan(0);
    expect(reflection.alternatives).not.toContain(reflection.nextObjective);
    expect(reflection.title).toBe('Cover crops, soil nitrogen & microbes');
    expect(titleFor('   ')).toBe('Research');
  });

  it('records discoveries whose evidence quotes real documents', async () => {
    const { discoveries, reflection } = await iterate(QUESTION);
    expect(discoveries.map((d) => d.claim)).toEqual(reflection.keyInsights);
    for (const d of discoveries) {
      expect(d.id).toMatch(/^d-[0-9a-f]{10}$/);
      expect(d.evidence.length).toBeGreaterThan(0);
      for (const e of d.evidence)
        expect(byId.get(e.docId)?.text.replace(/\s+/g, ' ')).toContain(e.quote);
    }
  });

  it('replies with the hypothesis, the sourced claims and the next objective', async () => {
    const { hypothesis, reflection, discoveries } = await iterate(QUESTION);
    const reply = composeReply({ objective: QUESTION, hypothesis, reflection, discoveries });
    expect(reply).toContain(hypothesis);
    expect(reply).toContain(reflection.nextObjective);
    for (const d of discoveries) expect(reply).toContain(d.evidence[0]!.docId);
  });

  it('says so when nothing in the corpus matches', async () => {
    const { findings, hypothesis } = await iterate('quantum chromodynamics of gluons');
    expect(findings).toEqual([]);
    expect(hypothesis).toMatch(/No passage in the corpus/);
  });
});
