/**
 * A progress bar with an ETA on stderr. On a terminal it redraws one line (at most ten
 * times a second); elsewhere (when asked for with `--progress`) it prints a line for each
 * percent done.
 */
export class Progress {
  readonly #start = performance.now();
  #last = Number.NEGATIVE_INFINITY;
  #percent = -1;
  #shown = false;

  constructor(
    readonly stream: NodeJS.WritableStream & { isTTY?: boolean },
    readonly label: string,
  ) {}

  update(done: number, total: number): void {
    const now = performance.now();
    const finished = done >= total;
    const share = total === 0 ? 1 : done / total;
    const percent = Math.floor(share * 100);
    if (!finished && (this.stream.isTTY ? now - this.#last < 100 : percent === this.#percent))
      return;
    this.#last = now;
    this.#percent = percent;
    const width = 30;
    const filled = Math.round(share * width);
    const elapsed = (now - this.#start) / 1000;
    const eta = done === 0 ? '?' : `${Math.ceil((elapsed / done) * (total - done))}s`;
    const text = `${this.label} [${'='.repeat(filled)}${' '.repeat(width - filled)}] ${done}/${total} ${percent}% ETA ${finished ? '0s' : eta}`;
    this.stream.write(this.stream.isTTY ? `\r${text}` : `${text}\n`);
    this.#shown = true;
  }

  /** Ends the redrawn line. */
  end(): void {
    if (this.#shown && this.stream.isTTY) this.stream.write('\n');
  }
}
