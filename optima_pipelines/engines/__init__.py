"""The engines that act on WB (bids, prices, slots, review answers) and their audit trail."""
