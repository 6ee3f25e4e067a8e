#include "trainer/model/relu_squared.h"

namespace xv::trainer {

namespace {

class ReluSquaredFunction : public torch::autograd::Function<ReluSquaredFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x) {
    torch::Tensor r = torch::relu(x);
    ctx->save_for_backward({r});
    return r * r;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor r = ctx->get_saved_variables()[0];
    // d/dx relu(x)^2 = 2 relu(x) (0 where x <= 0, where r is 0).
    return {(grad_outputs[0] * r).mul_(2)};
  }
};

}  // namespace

torch::Tensor ReluSquared(const torch::Tensor& x) { return ReluSquaredFunction::apply(x); }

}  // namespace xv::trainer
