// The CPU replay of word2vec's lockstep rounds (word2vec_rounds.cpp), called by the
// word2vec_train op when round_size > 0.
#pragma once

#include "../common/word2vec_math.h"

namespace fastsoftmax {
namespace w2v {

// Trains a.round_size > 0 rounds over the batch of `a` on this thread; stats [3] as the op
// returns them (summed loss, positive predictions, tokens kept).
void train_rounds_cpu(const TrainParams& a, double* stats);

}  // namespace w2v
}  // namespace fastsoftmax
