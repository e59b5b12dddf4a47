#!/usr/bin/env python3
"""kiln's PLD accountant (kiln/privacy.h) against Google's dp-accounting and Opacus, for
tests/optim/privacy_pld_test.cc, which writes FILE: for each case the sampling rate q, the
noise multiplier sigma and the steps; kiln's epsilon at each of the deltas (the default
PldOptions: discretization 1e-4, tail mass 1e-15); and kiln's delta at half the epsilon of
the first delta.

dp-accounting gives two estimates of the same privacy loss distribution, and states that
the true value lies between them: its PLDAccountant's (a PoissonSampledDpEvent of a
GaussianDpEvent composed `steps` times; the pessimistic "connect the dots" discretization
at 1e-4, as kiln computes it), an upper bound, and the optimistic one (from_gaussian_mechanism
with pessimistic_estimate=False: every loss rounded down to the grid, composed by
self_compose), a lower bound; the two lie about steps x 1e-4 / 2 apart.

Agreement: kiln's epsilon within those bounds, with a relative slack of 1e-6 either side:
kiln computes what the PLDAccountant computes, but with another FFT (Eigen's KissFFT, of
other lengths, the power taken in polar form) and one step's deltas without some of
dp-accounting's subtractions of nearly equal terms, which leaves rounding differences in
the composed PLD; measured, they move epsilon by up to 4.9e-8 relative, most where delta
is smallest (1e-6) and the steps most (10,000). Likewise kiln's delta (plus 1e-15 either way, the mass cut from the
tails, which dp-accounting counts at every composition and kiln where a cut was made).
Reported: the largest relative
difference of kiln's epsilon to the PLDAccountant's, the estimate kiln and the accountant
both give.

Opacus: its PRV accountant (Gopi et al. 2021; PRVAccountant, which Opacus' privacy engine
uses by default), another discretization of the same distribution, which states its own
bounds: compute_epsilon's lower and upper epsilon at Opacus' defaults (an error of 0.01
in epsilon, delta / 1000 in delta), of the discrete PRV that PRVAccountant.get_epsilon
builds (_get_dprv; get_epsilon returns the upper bound alone). kiln's epsilon must lie
between them, at the first delta (the second would add 20 s), except where Opacus takes
most of a minute (q = 0.1 with 10,000 steps: a fine mesh over a wide domain). The PRV modules are loaded from the installed package
without its __init__, which would import PyTorch (the peers' environment does not hold
it); they import opacus.optimizers for a type alone, which is given a stand-in.

  privacy_pld_crosscheck.py FILE    exit 0 when everything agrees, 1 naming each difference,
                                    2 when the peers' environment is missing or not the pins.
Any Python starts it: it runs itself again under .venv/peers (scripts/setup).
"""
import importlib.util
import json
import os
import sys
import types
import warnings

import peers

RTOL = 1e-6
CUT = 1e-15
OPACUS_EPSILON_ERROR = 0.01


def opacus_prv_accountant():
    """Opacus' PRVAccountant class, without importing PyTorch."""
    spec = importlib.util.find_spec("opacus")
    if spec is None:
        raise ImportError(name="opacus")
    package = types.ModuleType("opacus")
    package.__path__ = [os.path.dirname(spec.origin)]
    sys.modules["opacus"] = package
    optimizers = types.ModuleType("opacus.optimizers")
    optimizers.DPOptimizer = object
    sys.modules["opacus.optimizers"] = optimizers
    from opacus.accountants.prv import PRVAccountant
    return PRVAccountant


def main(argv):
    if len(argv) != 2:
        print(__doc__)
        return 2
    peers.enter("privacy_pld_crosscheck.py")
    try:
        from dp_accounting import dp_event
        from dp_accounting.pld import pld_privacy_accountant
        from dp_accounting.pld import privacy_loss_distribution
        PRVAccountant = opacus_prv_accountant()
    except ImportError as error:
        peers.fail("privacy_pld_crosscheck.py",
                   f"{error.name} is missing from {sys.prefix}; run scripts/setup")
    from importlib import metadata
    peers.require("privacy_pld_crosscheck.py",
                  {"dp-accounting": metadata.version("dp-accounting"),
                   "opacus": metadata.version("opacus")})
    # Opacus' domain comes from its RDP accountant, which warns when its best order is its
    # largest.
    warnings.filterwarnings("ignore", message="Optimal order is the largest alpha")

    def within(kiln_value, low, high, slack=0.0):
        return low * (1 - RTOL) - slack <= kiln_value <= high * (1 + RTOL) + slack

    with open(argv[1]) as f:
        record = json.load(f)
    failed, worst, worst_case, widest = [], 0.0, "", 0.0
    opacus_compared, opacus_farthest = 0, 0.0
    for case in record["cases"]:
        q, sigma, steps = case["q"], case["sigma"], case["steps"]
        what = f"q {q:g}, sigma {sigma:g}, {steps} steps"
        accountant = pld_privacy_accountant.PLDAccountant()
        accountant.compose(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma)),
                           steps)
        optimistic = privacy_loss_distribution.from_gaussian_mechanism(
            sigma, sampling_prob=q, pessimistic_estimate=False,
            use_connect_dots=False).self_compose(steps)
        for delta, kiln_epsilon in zip(case["deltas"], case["epsilons"]):
            high = float(accountant.get_epsilon(delta))
            low = float(optimistic.get_epsilon_for_delta(delta))
            widest = max(widest, (high - low) / high)
            difference = abs(kiln_epsilon - high) / high
            if difference > worst:
                worst, worst_case = difference, f"{what}, delta {delta:g}"
            if not within(kiln_epsilon, low, high):
                failed.append(f"{what}, delta {delta:g}: kiln epsilon {kiln_epsilon!r}, "
                              f"dp-accounting between {low!r} and {high!r}")
            if delta != case["deltas"][0] or (q >= 0.1 and steps >= 10000):
                continue
            opacus = PRVAccountant()
            opacus.history = [(sigma, q, steps)]
            prv = opacus._get_dprv(eps_error=OPACUS_EPSILON_ERROR, delta_error=delta / 1000)
            low, estimate, high = (float(value) for value in prv.compute_epsilon(
                delta, delta / 1000, OPACUS_EPSILON_ERROR))
            opacus_compared += 1
            opacus_farthest = max(opacus_farthest, abs(kiln_epsilon - estimate))
            if not low <= kiln_epsilon <= high:
                failed.append(f"{what}, delta {delta:g}: kiln epsilon {kiln_epsilon!r}, "
                              f"opacus' PRV accountant between {low!r} and {high!r}")
        high = float(accountant.get_delta(case["epsilon"]))
        low = float(optimistic.get_delta_for_epsilon(case["epsilon"]))
        if not within(case["delta"], low, high, CUT):
            failed.append(f"{what}: kiln delta at epsilon {case['epsilon']!r} "
                          f"{case['delta']!r}, dp-accounting between {low!r} and {high!r}")
    for line in failed[:40]:
        print("FAILED", line)
    print(f"privacy_pld_crosscheck: {len(record['cases'])} cases against dp-accounting "
          f"{metadata.version('dp-accounting')}'s PLD accountant: largest relative difference "
          f"of kiln's epsilon to its (pessimistic) epsilon {worst:.3g} ({worst_case}); its "
          f"optimistic estimate up to {widest:.3g} below; against opacus "
          f"{metadata.version('opacus')}'s PRV accountant in {opacus_compared} (case, delta) "
          f"pairs: within its bounds (+-{OPACUS_EPSILON_ERROR:g}), at most "
          f"{opacus_farthest:.3g} from its estimate; {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
