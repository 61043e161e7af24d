// Settings that every rank of a job must share. Ranks that differ in one of
// them do not fail cleanly later: different shared-memory sizes put the
// ranks' data at different offsets (wrong sums, SIGBUS), different socket
// counts break the TCP handshake, different fusion or cache settings make
// the engines decide differently. So the ranks compare them when they meet
// (Communicator's rendezvous), before any transport is set up, and every
// rank raises the same MismatchError naming the variable, the values and
// the ranks.
//
// Settings that only shape this rank's behaviour (RINGCC_TIMEOUT_S,
// RINGCC_CYCLE_TIME_MS, RINGCC_SPIN_US, the stall settings, which rank 0
// alone applies, logging, addresses) may differ.
#pragma once

#include <string>
#include <vector>

namespace ringcc {

// This rank's shared settings as one line each: "NAME\tvalue\torigin", the
// value as the component uses it (after defaults and clamping) and its
// origin ("NAME=text" from the environment, or "" for the default). A
// variable that cannot be parsed has the value "!" followed by the error.
std::string shared_settings_text();

// Compares the ranks' shared_settings_text() (texts[r] is rank r's).
// Returns "" when they agree; otherwise sets *kind_invalid when `my_rank`'s
// own settings cannot be parsed (its message is then that error) and
// returns the message every rank raises.
std::string compare_shared_settings(const std::vector<std::string>& texts, int my_rank, bool* kind_invalid);

// RINGCC_TRANSPORT (auto, tcp, shm or mpi), checked: anything else raises
// InvalidArgument.
std::string transport_from_env();

}  // namespace ringcc
