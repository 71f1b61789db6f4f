import { describe, expect, it } from 'vitest';
import { newClaimId } from '../../src/storage/leases/claim/claim-id.js';

// newClaimId alone (claim-id.test.ts covers the claim id in the fence). Claim ids come from a
// pooled buffer of randomness (claim/claim-id.ts): every id must still be new, across refills of the pool,
// and fit the column it is compared with (bigint).
describe('newClaimId', () => {
  it('draws distinct signed 64-bit ids, across several refills of its pool', () => {
    const ids = Array.from({ length: 5000 }, () => newClaimId());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(id).toMatch(/^-?[1-9][0-9]*$|^0$/);
      const value = BigInt(id);
      expect(value >= -(2n ** 63n) && value < 2n ** 63n).toBe(true);
    }
    // Random, not a counter: consecutive ids are not one apart.
    const steps = ids.slice(1).filter((id, i) => BigInt(id) - BigInt(ids[i] as string) === 1n);
    expect(steps.length).toBe(0);
  });
});
