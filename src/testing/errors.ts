/**
 * A failed expectation of `leasehold/testing` (`expectEnqueued`, `drain`): a plain `Error`
 * subclass, so Vitest, Jest and node:test all report it as a test failure with its message.
 */
export class TestExpectationError extends Error {
  /** Stable code to check instead of `instanceof` (two copies of the package may be installed). */
  readonly code = 'TEST_EXPECTATION';

  constructor(message: string) {
    super(message);
    this.name = 'TestExpectationError';
  }
}
