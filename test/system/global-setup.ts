import { pgBouncerBinary } from '../support/pgbouncer.js';

/**
 * The system suite needs software that only system packages provide; it refuses to start without
 * it instead of skipping, so a green run always means the tests ran.
 */
export default function requireSystemPackages(): void {
  pgBouncerBinary();
}
