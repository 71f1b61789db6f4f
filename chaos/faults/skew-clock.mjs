// Preloaded (`node --import ./chaos/faults/skew-clock.mjs`) into a worker whose wall clock must be wrong:
// Date.now() and `new Date()` run CHAOS_CLOCK_SKEW_MS ahead (or behind, when negative). Monotonic
// time (performance.now(), timers) is untouched, as it would be on a host whose clock is set wrong.
// Leasehold must not care: every lease and schedule decision uses database time or durations.
const skewMs = Number(process.env.CHAOS_CLOCK_SKEW_MS ?? 0);

if (Number.isFinite(skewMs) && skewMs !== 0) {
  const RealDate = Date;
  const realNow = RealDate.now.bind(RealDate);
  class SkewedDate extends RealDate {
    constructor(...args) {
      if (args.length === 0) super(realNow() + skewMs);
      else super(...args);
    }
    static now() {
      return realNow() + skewMs;
    }
  }
  globalThis.Date = SkewedDate;
}
