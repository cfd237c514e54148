/**
 * The one seeded PRNG of Hercules's tests, simulators, soak and benchmarks (sfc32): the same seed,
 * the same draws, so a run of a seed (a simulator's, a fault schedule's, a benchmark's workload)
 * is the same every time. The simulator's seeds were drawn with it, so it must not change.
 */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;
  constructor(seed: number) {
    this.a = 0x9e3779b9;
    this.b = 0x243f6a88;
    this.c = 0xb7e15162;
    this.d = seed >>> 0;
    for (let i = 0; i < 15; i++) this.next();
  }
  /** Uniform in [0, 2^32). */
  next(): number {
    const t = (((this.a + this.b) | 0) + this.d) | 0;
    this.d = (this.d + 1) | 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) | 0;
    this.c = (this.c << 21) | (this.c >>> 11);
    this.c = (this.c + t) | 0;
    return t >>> 0;
  }
  /** Uniform in [0, 1). */
  float(): number {
    return this.next() / 4294967296;
  }
  /** Its floats as a function, for an API that takes a random source (`() => number`, as Math.random). */
  source(): () => number {
    return () => this.float();
  }
  /** Integer in [lo, hi]. */
  int(lo: number, hi: number): number {
    return lo + Math.floor(this.float() * (hi - lo + 1));
  }
  chance(p: number): boolean {
    return this.float() < p;
  }
  pick<T>(xs: readonly T[]): T {
    return xs[Math.floor(this.float() * xs.length)];
  }
}
