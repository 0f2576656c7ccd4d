import type { Branch, Checkpoint, Message, TurnStep } from '@cairn/core';

/** Writes the transcript: colours on a terminal (unless NO_COLOR), plain text otherwise. */
/** Where the transcript goes: stdout, or anything with `write` (tests collect it). */
export interface TranscriptSink {
  write(text: string): unknown;
  isTTY?: boolean;
}

export class Terminal {
  readonly #out: TranscriptSink;
  readonly #color: boolean;
  readonly #tty: boolean;
  #barOpen = false;
  #lastPercent = -1;

  constructor(out: TranscriptSink = process.stdout, env: NodeJS.ProcessEnv = process.env) {
    this.#out = out;
    this.#tty = out.isTTY === true;
    this.#color = this.#tty && !env.NO_COLOR && env.TERM !== 'dumb';
  }

  paint(code: string, text: string): string {
    return this.#color ? `\x1b[${code}m${text}\x1b[0m` : text;
  }
  dim = (t: string) => this.paint('2', t);
  bold = (t: string) => this.paint('1', t);
  green = (t: string) => this.paint('32', t);
  cyan = (t: string) => this.paint('36', t);
  yellow = (t: string) => this.paint('33', t);
  magenta = (t: string) => this.paint('35', t);
  blue = (t: string) => this.paint('34', t);

  line(text = ''): void {
    this.#endBar();
    this.#out.write(`${text}\n`);
  }

  heading(text: string): void {
    this.line();
    this.line(this.bold(this.cyan(`━━ ${text} ${'━'.repeat(Math.max(0, 72 - text.length))}`)));
  }

  /** A progress bar on one redrawn line (on a terminal), or a line every 25% (in a log). */
  progress(label: string, done: number, total: number, detail = ''): void {
    const ratio = total === 0 ? 1 : Math.min(1, done / total);
    const percent = Math.floor(ratio * 100);
    if (this.#tty) {
      const width = 30;
      const filled = Math.round(ratio * width);
      const bar = this.green('█'.repeat(filled)) + this.dim('░'.repeat(width - filled));
      this.#out.write(
        `\r  ${label} ${bar} ${String(percent).padStart(3)}% ${this.dim(detail)}\x1b[K`,
      );
      this.#barOpen = true;
      if (done >= total) this.#endBar();
      return;
    }
    const step = Math.floor(percent / 25) * 25;
    if (step > this.#lastPercent || done >= total) {
      this.#lastPercent = done >= total ? -1 : step;
      this.#out.write(`  ${label} ${String(percent).padStart(3)}% ${detail}\n`);
    }
  }

  #endBar(): void {
    if (this.#barOpen) {
      this.#out.write('\n');
      this.#barOpen = false;
    }
  }
}

/** "plan 1 ms · literature 48 ms · ..." for a turn's steps. */
export function formatSteps(steps: readonly TurnStep[]): string {
  return steps
    .map(
      (s) =>
        `${s.name} ${s.end === null ? '…' : `${s.end - s.start} ms`}${s.error ? ' (failed)' : ''}`,
    )
    .join(' · ');
}

const ROLE_MARK: Record<string, string> = { user: 'U', assistant: 'A', tool: 'T' };

function mark(m: Message): string {
  if (m.type === 'plan') return 'P';
  if (m.type === 'hypothesis') return 'H';
  if (m.type === 'reflection') return 'E';
  if (m.type === 'reply') return 'R';
  if (m.type === 'upload') return 'D';
  return ROLE_MARK[m.role] ?? '?';
}

/**
 * The branch tree, one line per branch: each message as a letter (U user, D upload,
 * P plan, T literature task, H hypothesis, E reflection, R reply), ◆ after a checkpointed message,
 * and each branch indented under the message it forked from.
 */
export function drawBranchTree(
  term: Terminal,
  branches: readonly Branch[],
  chains: ReadonlyMap<string, readonly Message[]>,
  checkpoints: readonly Checkpoint[],
): string[] {
  const marked = new Map(checkpoints.map((c) => [c.messageId, c.name]));
  const byId = new Map(branches.map((b) => [b.id, b]));
  const lines: string[] = [];
  const nameWidth = Math.max(...branches.map((b) => b.name.length), 4);
  // Each message takes two columns; a branch starts right after its fork message.
  const column = (b: Branch): number => {
    const chain = chains.get(b.id) ?? [];
    if (!b.parentBranchId || !byId.has(b.parentBranchId)) return 0;
    const fork = chain.findIndex((m) => m.id === b.forkMessageId);
    return fork === -1 ? 0 : (fork + 1) * 2;
  };
  for (const b of branches) {
    const chain = chains.get(b.id) ?? [];
    const start = column(b) / 2;
    const own = chain.slice(start);
    const cells = own.map((m) => {
      const letter = mark(m);
      const painted =
        m.role === 'user'
          ? term.yellow(letter)
          : m.role === 'tool'
            ? term.dim(letter)
            : term.green(letter);
      return marked.has(m.id) ? `${painted}${term.magenta('◆')}` : `${painted} `;
    });
    const parent = b.parentBranchId ? byId.get(b.parentBranchId) : undefined;
    const lead = start === 0 ? '' : `${' '.repeat(Math.max(0, start * 2 - 2))}${term.dim('└─')}`;
    const tag = b.isActive ? term.bold(term.green(' ← active')) : '';
    const from = parent
      ? term.dim(
          ` (from ${parent.name}${b.forkMessageId && marked.has(b.forkMessageId) ? ` at ◆ ${marked.get(b.forkMessageId)}` : ''}, +${own.length} messages)`,
        )
      : term.dim(` (${chain.length} messages)`);
    lines.push(`  ${term.bold(b.name.padEnd(nameWidth))}  ${lead}${cells.join('')}${from}${tag}`);
  }
  lines.push(
    term.dim(
      `  ${' '.repeat(nameWidth)}  U user · D upload · P plan · T literature task · H hypothesis · E reflection · R reply · ◆ checkpoint`,
    ),
  );
  return lines;
}
