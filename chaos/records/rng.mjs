// A small seeded pseudo-random generator (mulberry32), so that a run's job mix and fault schedule
// can be repeated with --seed. Timing still varies from run to run; the draws do not.

/** Returns a function giving uniform numbers in [0, 1) from `seed`. */
export function seededRandom(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
